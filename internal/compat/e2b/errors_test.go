package e2b

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
)

// A start the host's admission queue refused is E2B's retryable 503 with
// Retry-After, like the native API's 503 capacity.
func TestCapacityIsRetryable503(t *testing.T) {
	err := fmt.Errorf("resume: %w", &controlplane.CapacityError{Reason: "start_queue_timeout", Queued: time.Second})
	status, body, retry := errorStatus(err)
	if status != http.StatusServiceUnavailable || body.ErrorCode != "capacity" || retry != 5 || body.Code != 503 {
		t.Fatalf("errorStatus = %d %+v retry %d", status, body, retry)
	}
}
