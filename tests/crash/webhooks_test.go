package crash

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestKillWithWebhookDeliveriesPending kills ptd right after the
// dispatcher queued deliveries (none sent yet) and right after a delivery
// was answered 2xx but before it was recorded: after the restart every
// state_changed event of the sandbox reaches the receiver (at least once).
func TestKillWithWebhookDeliveriesPending(t *testing.T) {
	d, a := startDaemon(t, "--webhook-allow-private", "--webhook-retry-base", "200ms")
	var mu sync.Mutex
	got := map[float64]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev map[string]any
		json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		got[ev["id"].(float64)]++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	_, before := a.do("GET", "/v1/events?format=json&limit=1000", nil)
	base, _ := before["next_after"].(float64)
	st, hook := a.do("POST", "/v1/webhooks", map[string]any{"url": srv.URL + "/hook", "events": []string{"state_changed"}})
	if st != 201 {
		t.Fatalf("create webhook: %d %v", st, hook)
	}
	t.Cleanup(func() { a.try("DELETE", "/v1/webhooks/"+hook["id"].(string), nil, nil) })

	for _, step := range []string{"webhook.queued", "webhook.sent"} {
		armCrash(t, d, step)
		_, m, err := a.try("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "disk_gb": 1, "metadata": map[string]string{"step": step}}, nil)
		if !d.WaitExit(60 * time.Second) {
			t.Fatalf("%s: ptd never reached the crashpoint (create: %v %v)", step, m, err)
		}
		crashed(t, d, step)
		rows := a.tagged("step", step)
		var id string
		switch len(rows) {
		case 0: // ptd died before the create committed (on an earlier event's delivery)
			st, m := a.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "disk_gb": 1, "metadata": map[string]string{"step": step}})
			if st != 201 {
				t.Fatalf("create: %d %v", st, m)
			}
			id = m["id"].(string)
		case 1:
			id = rows[0].(map[string]any)["id"].(string)
		default:
			t.Fatalf("%s: %d sandboxes, want 1", step, len(rows))
		}
		t.Cleanup(func() { a.try("DELETE", "/v1/sandboxes/"+id, nil, nil) })
		a.waitState(id, "running", 90*time.Second)
		// Every state change since the webhook was made, this sandbox's and
		// any other, reaches the receiver.
		_, evs := a.do("GET", fmt.Sprintf("/v1/events?format=json&type=state_changed&limit=1000&after=%d", int64(base)), nil)
		want, _ := evs["rows"].([]any)
		if len(want) == 0 {
			t.Fatalf("%s: no state_changed events: %v", step, evs)
		}
		eventually(t, 60*time.Second, func() string {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range want {
				eid := e.(map[string]any)["id"].(float64)
				if got[eid] == 0 {
					return fmt.Sprintf("%s: event %v never delivered after the restart (got %v)", step, eid, got)
				}
			}
			return ""
		})
	}
}
