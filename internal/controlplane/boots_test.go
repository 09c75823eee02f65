package controlplane

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestBootGate: slots are handed out in arrival order, never more than
// there are; a waiter whose context ends leaves the queue without taking a
// slot, and one handed a slot just as it gives up passes it on.
func TestBootGate(t *testing.T) {
	g := newBootGate(1)
	ctx := context.Background()
	r1, _ := g.acquire(ctx)
	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, err := g.acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			rel()
		}()
		for w, _ := g.stats(); w != i+1; w, _ = g.stats() {
			time.Sleep(time.Millisecond)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { _, err := g.acquire(cctx); gaveUp <- err }()
	for w, _ := g.stats(); w != 4; w, _ = g.stats() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if w, a := g.stats(); w != 3 || a != 1 {
		t.Fatalf("after a waiter gave up: %d waiting, %d active; want 3 and 1", w, a)
	}
	r1()
	wg.Wait()
	if len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2 {
		t.Errorf("slots handed out in order %v, want arrival order", order)
	}
	if w, a := g.stats(); w != 0 || a != 0 {
		t.Errorf("at rest: %d waiting, %d active", w, a)
	}
	// Many acquire/cancel races never leak or double-hand a slot.
	g = newBootGate(2)
	var holders, most atomic.Int32
	var wg2 sync.WaitGroup
	for i := range 200 {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			c, cancel := context.WithTimeout(ctx, time.Duration(i%5)*100*time.Microsecond)
			defer cancel()
			if rel, err := g.acquire(c); err == nil {
				n := holders.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(50 * time.Microsecond)
				holders.Add(-1)
				rel()
			}
		}()
	}
	wg2.Wait()
	if w, a := g.stats(); w != 0 || a != 0 || most.Load() > 2 {
		t.Errorf("after races: %d waiting, %d active, at most %d holders at once (2 slots)", w, a, most.Load())
	}
}

// TestBurstOfCreatesIsBounded: a burst of creates on a host with 2 boot
// slots never runs more than 2 host starts at once, and although each
// boot takes most of the provision deadline, every create reaches running:
// a create's deadline starts when it gets its slot, not while it queues.
// A create deleted while it queues never boots.
func TestBurstOfCreatesIsBounded(t *testing.T) {
	var inFlight, peak, starts atomic.Int32
	release := make(chan struct{})
	h := &fakeHost{StartFunc: func(ctx context.Context, spec StartSpec) (Instance, error) {
		starts.Add(1)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if spec.RAMMB == 384 { // the one deleted while queued would block here
			<-release
		}
		select {
		case <-time.After(150 * time.Millisecond):
			return Instance{Address: "127.0.0.1"}, nil
		case <-ctx.Done():
			return Instance{}, ctx.Err()
		}
	}}
	s, _ := newServiceWith(t, h, "", func(c *Config) {
		c.BootSlots = 2
		c.ProvisionTimeout = 400 * time.Millisecond
	})
	defer close(release)
	ctx := context.Background()
	var ids []string
	for range 10 {
		sb, err := s.Create(ctx, org, CreateRequest{Template: "busybox"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	queued, err := s.Create(ctx, org, CreateRequest{Template: "busybox", RAMMB: ptr(384)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, org, queued.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		got, ok, err := s.WaitFor(ctx, org, id, sandbox.StateRunning, 20*time.Second)
		if err != nil || !ok {
			t.Fatalf("%s: %s (%s), want running: %v", id, got.State, got.Reason, err)
		}
	}
	waitState(t, s, queued.ID, sandbox.StateDeleted)
	if p := peak.Load(); p > 2 {
		t.Errorf("%d host starts at once with 2 boot slots", p)
	}
	if n := starts.Load(); n != 10 {
		t.Errorf("%d host starts for 10 creates and one deleted while queued", n)
	}
}
