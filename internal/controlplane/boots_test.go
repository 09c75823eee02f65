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
	g := newBootGate(1, 0, time.Hour)
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
			rel.release(false)
		}()
		for w, _, _ := g.stats(); w != i+1; w, _, _ = g.stats() {
			time.Sleep(time.Millisecond)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { _, err := g.acquire(cctx); gaveUp <- err }()
	for w, _, _ := g.stats(); w != 4; w, _, _ = g.stats() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if w, a, _ := g.stats(); w != 3 || a != 1 {
		t.Fatalf("after a waiter gave up: %d waiting, %d active; want 3 and 1", w, a)
	}
	r1.release(false)
	wg.Wait()
	if len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2 {
		t.Errorf("slots handed out in order %v, want arrival order", order)
	}
	if w, a, l := g.stats(); w != 0 || a != 0 || l != 1 {
		t.Errorf("at rest: %d waiting, %d active, bound %d; a fixed bound of 1 stays 1", w, a, l)
	}
	// Many acquire/cancel races never leak or double-hand a slot.
	g = newBootGate(2, 0, time.Hour)
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
				rel.release(false)
			}
		}()
	}
	wg2.Wait()
	if w, a, _ := g.stats(); w != 0 || a != 0 || most.Load() > 2 {
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

// TestBootGateAdapts: with a queue, each fast boot adds a slot up to the
// ceiling; a slow boot halves the bound (not below the floor), once for
// all the boots that held slots before that cut; an idle gate starts
// again from the floor; a fixed bound never moves.
func TestBootGateAdapts(t *testing.T) {
	ctx := context.Background()
	g := newBootGate(2, 8, time.Hour)
	var held []*bootTicket
	take := func(n int) { // n slots free now: take them all
		t.Helper()
		for range n {
			tk, err := g.acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, tk)
		}
	}
	got := make(chan *bootTicket, 100)
	queue := func(n int) { // n boots wait for slots
		t.Helper()
		w0, _, _ := g.stats()
		for range n {
			go func() {
				tk, err := g.acquire(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- tk
			}()
		}
		for w, _, _ := g.stats(); w != w0+n; w, _, _ = g.stats() {
			time.Sleep(time.Millisecond)
		}
	}
	handed := func(n int) { // n waiters got slots
		t.Helper()
		for range n {
			held = append(held, <-got)
		}
	}
	check := func(wantWaiting, wantActive, wantLimit int) {
		t.Helper()
		if w, a, l := g.stats(); w != wantWaiting || a != wantActive || l != wantLimit {
			t.Fatalf("%d waiting, %d active, bound %d; want %d, %d, %d", w, a, l, wantWaiting, wantActive, wantLimit)
		}
	}
	pop := func() *bootTicket { tk := held[0]; held = held[1:]; return tk }

	take(2)
	check(0, 2, 2)
	queue(20)
	// Fast boots with a queue: +1 each, so each ends with two more
	// boots starting (its own slot and the new one), up to 8.
	for limit := 3; limit <= 8; limit++ {
		pop().release(false)
		handed(2)
		check(20-2*(limit-2), limit, limit)
	}
	pop().release(false) // at the ceiling: only its own slot passes on
	handed(1)
	check(7, 8, 8)
	// A slow boot halves the bound: 7 still run, none starts.
	pop().release(true)
	check(7, 7, 4)
	// The others that held slots before the cut were part of it.
	pop().release(true)
	pop().release(true)
	pop().release(true)
	check(7, 4, 4)
	// A boot that got its slot after the cut and was slow cuts again.
	pop().release(false) // 3 running, +1 → 5: two start
	handed(2)
	check(5, 5, 5)
	pop().release(true) // had its slot before the cut: no cut, one starts
	handed(1)
	check(4, 5, 5)
	held = append(held[2:], held[:2]...) // the two from before the cut last
	pop().release(true)                  // had its slot after the cut
	check(4, 4, 2)
	drain := func(slow bool) {
		t.Helper()
		for w, a, _ := g.stats(); w > 0 || a > 0; w, a, _ = g.stats() {
			if len(held) == 0 {
				handed(1) // handed a slot, not yet taken from got
			}
			pop().release(slow)
		}
	}
	drain(true)
	check(0, 0, 2)
	// Idle: back to the floor, even though the last boots were fast.
	take(2)
	queue(3)
	pop().release(false)
	handed(2)
	check(1, 3, 3)
	drain(false)
	check(0, 0, 2)

	// A fixed bound: fast boots with a queue never add slots.
	g = newBootGate(2, 0, time.Hour)
	held = nil
	take(2)
	queue(3)
	pop().release(false)
	handed(1)
	check(2, 2, 2)
	pop().release(true)
	handed(1)
	check(1, 2, 2)
}
