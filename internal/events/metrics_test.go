package events

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/metrics/metricstest"
)

// TestWebhookDeliveryMetrics: every delivery attempt is timed once under
// its outcome: retrying after a failure with attempts left, delivered,
// failed once the attempts are spent.
func TestWebhookDeliveryMetrics(t *testing.T) {
	s, _ := newTestService(t)
	s.cfg.AllowPrivate = true
	s.cfg.RetryBase = time.Millisecond
	s.cfg.MaxAttempts = 3
	deliveries := func(outcome string) float64 {
		return metricstest.Value(t, `platinum_webhook_delivery_duration_seconds_count{outcome="`+outcome+`"}`)
	}
	retrying, delivered, failed := deliveries("retrying"), deliveries("delivered"), deliveries("failed")
	ok := &receiver{fail: 1, got: make(chan struct{}, 1)} // fails once, then takes it
	okSrv := httptest.NewServer(ok)
	defer okSrv.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	ctx := context.Background()
	for _, u := range []string{okSrv.URL, down.URL} {
		if _, err := s.CreateWebhook(ctx, org, WebhookRequest{URL: u, Events: []string{"hello"}}); err != nil {
			t.Fatal(err)
		}
	}
	s.Run(ctx)
	s.store.AddEvent(ctx, org.OrgID, "sbx_1", "hello", nil)
	// One retry and one success for the first hook; two retries and a
	// final failure for the second.
	want := map[string]float64{"retrying": retrying + 3, "delivered": delivered + 1, "failed": failed + 1}
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		done := true
		for o, n := range want {
			if deliveries(o) != n {
				done = false
			}
		}
		if done {
			break
		}
	}
	for o, n := range want {
		if got := deliveries(o); got != n {
			t.Errorf("webhook deliveries %s = %v, want %v", o, got, n)
		}
	}
}
