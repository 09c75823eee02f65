package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

var (
	eventRuns  = flag.Int("event-runs", 25, "stop/start cycles of the event bench (4 state changes each; 0 skips it)")
	eventsOnly = flag.Bool("events-only", false, "run only the event bench")
)

// eventsBench measures how long a committed event takes to reach an SSE
// subscriber (GET /v1/events) and a webhook receiver on loopback, from the
// event's created_at (stamped in the writing transaction, same clock) to
// its arrival. The baseline, in the same run, is one
// GET /v1/events?format=json round trip: what a poller pays per look
// before its poll interval is even counted.
func eventsBench(c *benchkit.Client, n int) error {
	id, err := c.EnsureCreate("busybox")
	if err != nil {
		return err
	}
	defer c.Delete(id)

	var mu sync.Mutex
	sseAt, hookAt, created := map[int64]time.Time{}, map[int64]time.Time{}, map[int64]time.Time{}
	note := func(m map[int64]time.Time, body []byte, at time.Time) {
		var e struct {
			ID        int64  `json:"id"`
			SandboxID string `json:"sandbox_id"`
			CreatedAt string `json:"created_at"`
		}
		if json.Unmarshal(body, &e) != nil || e.SandboxID != id {
			return
		}
		t, _ := time.Parse(sandbox.TimeFormat, e.CreatedAt)
		mu.Lock()
		m[e.ID], created[e.ID] = at, t
		mu.Unlock()
	}

	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		b, _ := io.ReadAll(r.Body)
		note(hookAt, b, at)
	}))
	defer rcv.Close()
	st, b, err := c.Do("POST", "/v1/webhooks", map[string]any{"url": rcv.URL, "events": []string{"state_changed"}})
	if err != nil || st != 201 {
		return fmt.Errorf("create webhook (ptd needs --webhook-allow-private): %d %s %v", st, b, err)
	}
	var hook struct{ ID string }
	json.Unmarshal(b, &hook)
	defer c.Do("DELETE", "/v1/webhooks/"+hook.ID, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := c.NewRequest(ctx, "GET", "/v1/events?type=state_changed&sandbox_id="+id, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				note(sseAt, []byte(data), time.Now())
			}
		}
	}()

	var polls []time.Duration
	for i := 0; i < n; i++ {
		for _, step := range []string{"stop?wait_for_state=stopped", "start?wait_for_state=running"} {
			if st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/"+step, nil); err != nil || st != 200 {
				return fmt.Errorf("%s: %d %s %v", step, st, b, err)
			}
		}
		t0 := time.Now()
		if st, b, err := c.Do("GET", "/v1/events?format=json&limit=1&after="+strconv.Itoa(1<<30), nil); err != nil || st != 200 {
			return fmt.Errorf("events page: %d %s %v", st, b, err)
		}
		polls = append(polls, time.Since(t0))
	}
	want := 4 * n
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		done := len(sseAt) >= want && len(hookAt) >= want
		mu.Unlock()
		if done {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// Only the events of the stop/start cycles: the stream's backlog (the
	// sandbox's creation) was not pushed, and the webhook, created later,
	// never got it.
	lat := func(m map[int64]time.Time) []time.Duration {
		var out []time.Duration
		for id, at := range m {
			if _, ok := hookAt[id]; ok {
				out = append(out, at.Sub(created[id]))
			}
		}
		return out
	}
	if len(sseAt) < want || len(hookAt) < want {
		return fmt.Errorf("events bench: %d SSE and %d webhook arrivals of %d events", len(sseAt), len(hookAt), want)
	}
	benchkit.Report("GET /v1/events?format=json round trip", polls, nil)
	benchkit.Report("SSE push: event commit → client", lat(sseAt), polls)
	benchkit.Report("webhook: event commit → receiver", lat(hookAt), polls)
	return nil
}
