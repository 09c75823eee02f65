package controlplane

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// countingHost is a fakeHost whose Running answers after delay, counting
// the checks in flight (and their peak) and every sandbox asked about.
type countingHost struct {
	*fakeHost
	delay    time.Duration
	inFlight atomic.Int64
	peak     atomic.Int64
	mu       sync.Mutex
	visited  map[string]int
}

func (h *countingHost) Running(ctx context.Context, id string) bool {
	n := h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
	}
	time.Sleep(h.delay)
	h.mu.Lock()
	h.visited[id]++
	h.mu.Unlock()
	return true
}

// fleet stores n running sandboxes directly (no host start), as a ptd
// restarted over a large fleet finds them.
func fleet(tb testing.TB, st store.Store, n int) []string {
	tb.Helper()
	ids := make([]string, n)
	now := time.Now().UTC()
	for i := range ids {
		sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: org.OrgID, State: sandbox.StateRunning,
			Template: "busybox", CPU: 1, RAMMB: 256, DiskGB: 1, Address: "127.0.0.1", CreatedAt: now, UpdatedAt: now}
		if err := st.CreateSandbox(context.Background(), sb); err != nil {
			tb.Fatal(err)
		}
		ids[i] = sb.ID
	}
	return ids
}

// TestReconcilePassIsBounded: a pass over 1,000 running sandboxes checks
// every one exactly once, never more than ReconcileWorkers at a time, and
// runChecks returns only when all are done (so periodic passes never
// overlap). Before the pool, every pass started one goroutine per
// running sandbox at once.
func TestReconcilePassIsBounded(t *testing.T) {
	const workers = 4
	h := &countingHost{fakeHost: &fakeHost{}, delay: 200 * time.Microsecond, visited: map[string]int{}}
	s, st := newServiceWith(t, h, "", func(c *Config) { c.ReconcileWorkers = workers })
	ids := fleet(t, st, 1000)
	checks, err := s.reconcilePass(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	s.runChecks(context.Background(), checks)
	if p := h.peak.Load(); p > workers || p < 1 {
		t.Errorf("peak concurrent checks %d, want 1..%d", p, workers)
	}
	if n := h.inFlight.Load(); n != 0 {
		t.Errorf("%d checks still running after runChecks returned", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.visited) != len(ids) {
		t.Errorf("visited %d of %d sandboxes", len(h.visited), len(ids))
	}
	for _, id := range ids {
		if h.visited[id] != 1 {
			t.Errorf("%s checked %d times", id, h.visited[id])
			break
		}
	}
}

// TestReconcilerLoopEndsWithItsContext: RunReconciler's one loop runs
// passes and its goroutine ends when its context does (Close waits on it).
func TestReconcilerLoopEndsWithItsContext(t *testing.T) {
	h := &countingHost{fakeHost: &fakeHost{}, visited: map[string]int{}}
	s, st := newServiceWith(t, h, "", nil)
	fleet(t, st, 10)
	ctx, cancel := context.WithCancel(context.Background())
	s.RunReconciler(ctx, 10*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		n := len(h.visited)
		h.mu.Unlock()
		if n == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loop checked %d of 10 sandboxes", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the reconciler's context ended")
	}
}

// BenchmarkReconcilePass times one pass over 1,000 running sandboxes
// (store read, then one check each: lock, record read, host Running that
// takes 2 ms as a runtime state call does) at several pool sizes;
// workers=1000 is the unbounded baseline (what one goroutine per sandbox
// did). Run with:
// go test -run '^$' -bench ReconcilePass -benchtime 3x ./internal/controlplane/
func BenchmarkReconcilePass(b *testing.B) {
	for _, workers := range []int{1, 4, 16, 1000} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			h := &countingHost{fakeHost: &fakeHost{}, delay: 2 * time.Millisecond, visited: map[string]int{}}
			s, st := newServiceWith(b, h, "", func(c *Config) { c.ReconcileWorkers = workers })
			fleet(b, st, 1000)
			b.ResetTimer()
			for range b.N {
				checks, err := s.reconcilePass(context.Background(), false)
				if err != nil {
					b.Fatal(err)
				}
				s.runChecks(context.Background(), checks)
			}
			b.ReportMetric(float64(h.peak.Load()), "peak-checks")
		})
	}
}
