package controlplane

import (
	"context"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/metrics"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// series reads one series' value from a scrape of s (0 when absent).
func series(t *testing.T, s *Service, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler(s.Collector()).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TestLifecycleMetrics: each lifecycle operation is recorded once, under
// the sandbox's runtime class, when its sandbox reaches the state it was
// after (a refusal at once, as refused), and the by-state gauge and the
// capacity used follow the store.
func TestLifecycleMetrics(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	count := func(op, outcome string) float64 {
		return series(t, s, `platinum_lifecycle_operation_duration_seconds_count{op="`+op+`",outcome="`+outcome+`",runtime="runc"}`)
	}
	// A wait that polls can see the new state a moment before the
	// transition is recorded; a scrape is not a barrier, so read until the
	// count is what we want or a second has gone.
	countIs := func(op, outcome string, want float64) float64 {
		var got float64
		for end := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
			if got = count(op, outcome); got == want || time.Now().After(end) {
				return got
			}
		}
	}
	created, stopped, started, refused := count("create", "ok"), count("stop", "ok"), count("start", "ok"), count("start", "refused")
	sb := running(t, s, CreateRequest{Template: "busybox", Runtime: "runc", CPU: new(2.0)})
	if got := countIs("create", "ok", created+1); got != created+1 {
		t.Errorf("create ok = %v, want %v", got, created+1)
	}
	if got := series(t, s, `platinum_sandboxes{state="running"}`); got < 1 {
		t.Errorf("running sandboxes = %v", got)
	}
	if got := series(t, s, `platinum_host_capacity_used{resource="cpu"}`); got < 2 {
		t.Errorf("cpu used = %v with a 2-cpu sandbox running", got)
	}
	// step runs one operation on sb, waits for the state it is after and
	// checks that it was recorded once as ok (before: the count until now).
	step := func(op string, do func(context.Context, Principal, string) (sandbox.Sandbox, error), state sandbox.State, before float64) {
		t.Helper()
		if _, err := do(ctx, org, sb.ID); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.WaitFor(ctx, org, sb.ID, state, 5*time.Second); !ok {
			t.Fatal("not " + string(state))
		}
		if got := countIs(op, "ok", before+1); got != before+1 {
			t.Errorf("%s ok = %v, want %v", op, got, before+1)
		}
	}
	step("stop", s.Stop, sandbox.StateStopped, stopped)
	step("start", s.Start, sandbox.StateRunning, started)
	// Starting a running sandbox is a no-op, not an operation.
	if _, err := s.Start(ctx, org, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got := count("start", "ok") + count("start", "refused"); got != started+1+refused {
		t.Errorf("a no-op start was recorded: %v", got)
	}
}
