package controlplane

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// admitted waits (briefly) for a pending acquire to return a slot.
func admitted(t *testing.T, ch <-chan func()) func() {
	t.Helper()
	select {
	case rel := <-ch:
		return rel
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter was never admitted")
		return nil
	}
}

// acquireAsync starts an acquire for org and delivers its release; it
// returns once that acquire is queued (or admitted), so calls queue in
// the order they are made.
func acquireAsync(t *testing.T, a *admission, org string) <-chan func() {
	a.mu.Lock()
	queued := len(a.waiters)
	a.mu.Unlock()
	ch := make(chan func(), 1)
	go func() {
		rel, err := a.acquire(context.Background(), org)
		if err != nil {
			t.Errorf("acquire %s: %v", org, err)
			return
		}
		ch <- rel
	}()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(ch) == 0; time.Sleep(time.Millisecond) {
		a.mu.Lock()
		n := len(a.waiters)
		a.mu.Unlock()
		if n > queued {
			break
		}
	}
	return ch
}

func TestAdmissionSlotsAndFairness(t *testing.T) {
	a := newAdmission(AdmissionConfig{Queue: true, Slots: 2, SlotsSaturated: 1, Wait: 10 * time.Second, MaxQueue: 3})
	ctx := context.Background()
	relA1, err := a.acquire(ctx, "org_a")
	if err != nil {
		t.Fatal(err)
	}
	relA2, err := a.acquire(ctx, "org_a")
	if err != nil {
		t.Fatal(err)
	}
	// Both slots taken: the next starts wait, holding no slot.
	wA := acquireAsync(t, a, "org_a")
	wB := acquireAsync(t, a, "org_b")
	if a.active != 2 {
		t.Fatalf("active = %d with two waiting, want 2 (waiters hold no slot)", a.active)
	}
	// A freed slot goes to org_b (no start in flight), though org_a came first.
	relA1()
	relB := admitted(t, wB)
	select {
	case <-wA:
		t.Fatal("org_a was admitted before org_b, which had fewer starts in flight")
	default:
	}
	relA2()
	relA3 := admitted(t, wA)
	relB()
	relA3()
	if a.active != 0 || len(a.byOrg) != 0 {
		t.Fatalf("after every release: active %d, by org %v", a.active, a.byOrg)
	}
	// Releasing twice gives back one slot only.
	rel, _ := a.acquire(ctx, "org_a")
	rel()
	rel()
	if a.active != 0 {
		t.Fatalf("a double release left active = %d", a.active)
	}
}

func TestAdmissionRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("queue full", func(t *testing.T) {
		a := newAdmission(AdmissionConfig{Queue: true, Slots: 1, Wait: 10 * time.Second, MaxQueue: 1})
		rel, _ := a.acquire(ctx, "o")
		w := acquireAsync(t, a, "o")
		_, err := a.acquire(ctx, "o")
		var ce *CapacityError
		if !errors.As(err, &ce) || ce.Reason != "start_queue_full" {
			t.Fatalf("third start with a queue of one: %v", err)
		}
		rel()
		admitted(t, w)()
	})
	t.Run("wait runs out", func(t *testing.T) {
		a := newAdmission(AdmissionConfig{Queue: true, Slots: 1, Wait: 50 * time.Millisecond, MaxQueue: 8})
		rel, _ := a.acquire(ctx, "o")
		defer rel()
		_, err := a.acquire(ctx, "o")
		var ce *CapacityError
		if !errors.As(err, &ce) || ce.Reason != "start_queue_timeout" || ce.Queued < 50*time.Millisecond {
			t.Fatalf("start past the wait: %v", err)
		}
		if len(a.waiters) != 0 {
			t.Fatalf("a timed-out waiter stayed queued")
		}
	})
	t.Run("the call's deadline is shorter", func(t *testing.T) {
		a := newAdmission(AdmissionConfig{Queue: true, Slots: 1, Wait: time.Minute, MaxQueue: 8})
		rel, _ := a.acquire(ctx, "o")
		defer rel()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		_, err := a.acquire(cctx, "o")
		var ce *CapacityError
		if !errors.As(err, &ce) || ce.Reason != "start_queue_timeout" {
			t.Fatalf("start past the call's deadline: %v", err)
		}
	})
	t.Run("busy host has fewer slots", func(t *testing.T) {
		var busy atomic.Bool
		busy.Store(true)
		a := newAdmission(AdmissionConfig{Queue: true, Slots: 8, SlotsSaturated: 2, Wait: 20 * time.Millisecond, MaxQueue: 8, HostBusy: busy.Load})
		r1, _ := a.acquire(ctx, "o")
		r2, _ := a.acquire(ctx, "o")
		if _, err := a.acquire(ctx, "o"); err == nil {
			t.Fatal("a third start on a saturated host got a slot")
		}
		busy.Store(false)
		r3, err := a.acquire(ctx, "o")
		if err != nil {
			t.Fatalf("once the CPU is back under the line: %v", err)
		}
		r1()
		r2()
		r3()
	})
	t.Run("off", func(t *testing.T) {
		a := newAdmission(AdmissionConfig{Queue: false, Slots: 1})
		for range 3 {
			if _, err := a.acquire(ctx, "o"); err != nil {
				t.Fatalf("admission off refused a start: %v", err)
			}
		}
	})
}

// TestShortQueueWaitBoundsOnlyTheQueue: a start whose caller waits only
// 1 ms is admitted at once on an idle host and runs to the end; on a host
// whose every start slot is taken the same 1 ms wait is the documented
// refusal (CapacityError start_queue_timeout) and the sandbox stays
// stopped. A caller's context that has already run out of time does not
// stop an admitted start either.
func TestShortQueueWaitBoundsOnlyTheQueue(t *testing.T) {
	s, _ := newServiceWith(t, &fakeHost{}, "", func(c *Config) { c.Admission.Slots = 2 })
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox"})
	stop := func() {
		t.Helper()
		if _, err := s.Stop(ctx, org, sb.ID); err != nil {
			t.Fatal(err)
		}
		waitState(t, s, sb.ID, sandbox.StateStopped)
	}
	stop()
	if _, err := s.StartWithin(ctx, org, sb.ID, time.Millisecond); err != nil {
		t.Fatalf("idle host, 1 ms queue wait: %v", err)
	}
	waitState(t, s, sb.ID, sandbox.StateRunning)

	stop()
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if got, err := s.StartWithin(expired, org, sb.ID, time.Millisecond); err != nil || got.State != sandbox.StateStarting {
		t.Fatalf("idle host, caller's deadline already past: %v %v", got.State, err)
	}
	waitState(t, s, sb.ID, sandbox.StateRunning)

	stop()
	r1, _ := s.starts.acquire(ctx, "org_other")
	r2, _ := s.starts.acquire(ctx, "org_other")
	var ce *CapacityError
	if _, err := s.StartWithin(ctx, org, sb.ID, time.Millisecond); !errors.As(err, &ce) || ce.Reason != "start_queue_timeout" {
		t.Errorf("busy host, 1 ms queue wait: %v", err)
	}
	if got, _ := s.Get(ctx, org, sb.ID, false); got.State != sandbox.StateStopped {
		t.Errorf("a refused start left the sandbox %s", got.State)
	}
	r1()
	r2()
}
