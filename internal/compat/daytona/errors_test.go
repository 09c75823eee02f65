package daytona

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestErrorStatus: the statuses the SDK maps onto its error classes
// (404 DaytonaNotFoundError, 400 wrong state, 409 a transition in flight,
// 429, …).
func TestErrorStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("x: %w", sandbox.ErrNotFound), http.StatusNotFound},
		{&controlplane.StateError{State: sandbox.StateStopped}, http.StatusBadRequest},
		{&controlplane.StateError{State: sandbox.StateStopping}, http.StatusConflict},
		{&controlplane.StateError{State: sandbox.StateArchiving}, http.StatusConflict},
		{&sandbox.QuotaError{}, http.StatusTooManyRequests},
		{&controlplane.CapacityError{Reason: "start_queue_full"}, http.StatusServiceUnavailable},
		{&sandbox.FieldError{Field: "cpu", Reason: "bad"}, http.StatusBadRequest},
		{fmt.Errorf("t: %w", sandbox.ErrUnauthenticated), http.StatusUnauthorized},
		{fmt.Errorf("n: %w", sandbox.ErrConflict), http.StatusConflict},
		{context.DeadlineExceeded, http.StatusGatewayTimeout},
		{badRequest("nope"), http.StatusBadRequest},
		{errors.New("disk on fire"), http.StatusInternalServerError},
	} {
		status, body := errorStatus(c.err)
		if status != c.want || body.StatusCode != c.want || body.Error != http.StatusText(c.want) || body.Message == "" {
			t.Errorf("%T %v: %d %+v, want %d", c.err, c.err, status, body, c.want)
		}
		if status == http.StatusInternalServerError && body.Message == c.err.Error() {
			t.Errorf("an internal cause reached the client: %q", body.Message)
		}
	}
}

// TestRetention: Daytona's minute timers onto Platinum's.
func TestRetention(t *testing.T) {
	for _, c := range []struct {
		stop, archive, del int
		want               sandbox.Retention
		err                bool
	}{
		{15, 7 * 24 * 60, -1, sandbox.Retention{Type: "persistent", AutoStopMinutes: 15, AutoArchiveDays: 7}, false},
		{0, 0, -1, sandbox.Retention{Type: "persistent", AutoArchiveDays: 30}, false},                     // 0 disables stop; archive 0 = the maximum
		{15, 60, 0, sandbox.Retention{Type: "ephemeral", AutoStopMinutes: 15, AutoArchiveDays: 1}, false}, // delete at stop; minutes round up to a day
		{15, 1441, 2881, sandbox.Retention{Type: "persistent", AutoStopMinutes: 15, AutoArchiveDays: 2, AutoDeleteDays: 3}, false},
		{-1, 0, -1, sandbox.Retention{}, true},
		{0, -5, -1, sandbox.Retention{}, true},
	} {
		got, err := retention(c.stop, c.archive, c.del)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("retention(%d, %d, %d) = %+v, %v; want %+v (error %v)", c.stop, c.archive, c.del, got, err, c.want, c.err)
		}
	}
}
