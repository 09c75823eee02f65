package controlplane

import (
	"context"
	"errors"
	"fmt"
	"github.com/platinum-dev/platinum/internal/metrics"
	"sync"
	"time"
)

// AdmissionConfig is the start admission queue (docs/stop-start.md,
// "Starting while the host is busy"): a start that arrives while the host
// has too many starts in flight waits for a start slot instead of being
// refused at once, and is refused (503 capacity) only when the queue is
// full or the wait runs out. Creates are not queued.
type AdmissionConfig struct {
	// Queue turns admission on (placement.start_admission_queue).
	Queue bool
	// Slots is how many starts run at once on the host
	// (placement.start_admission_slots), SlotsSaturated how many while
	// HostBusy reports its CPU over the line
	// (placement.start_admission_slots_saturated).
	Slots, SlotsSaturated int
	// Wait bounds a start's wait for a slot (start_admission_wait_ms); the
	// call's own deadline wins when shorter.
	Wait time.Duration
	// MaxQueue bounds the waiters (start_admission_max_queue).
	MaxQueue int
	// HostBusy reports whether the host's measured CPU is over
	// overcommit.host_cpu_refuse_pct; nil means never.
	HostBusy func() bool
}

// DefaultAdmissionConfig returns the defaults docs/stop-start.md states, queue on.
func DefaultAdmissionConfig() AdmissionConfig {
	return AdmissionConfig{Queue: true, Slots: 8, SlotsSaturated: 2, Wait: 30 * time.Second, MaxQueue: 64}
}

// CapacityError is a start the admission queue could not admit: the
// sandbox stays stopped; call again after Retry-After.
type CapacityError struct {
	Reason string // start_queue_full, start_queue_timeout, host_draining or host_lost
	Queued time.Duration
}

func (e *CapacityError) Error() string {
	switch e.Reason {
	case ReasonHostDraining, ReasonHostLost:
		return fmt.Sprintf("no host takes new sandboxes (%s); create again after Retry-After", e.Reason)
	}
	return fmt.Sprintf("the host is busy starting other sandboxes (%s after %d ms); the sandbox stays stopped, call start again after Retry-After",
		e.Reason, e.Queued.Milliseconds())
}

// admission hands out the host's start slots: to the org with the fewest
// starts in flight first, then in arrival order. Waiters hold no slot.
type admission struct {
	cfg AdmissionConfig

	mu      sync.Mutex
	active  int
	byOrg   map[string]int // starts in flight per org
	waiters []*admissionWaiter
}

type admissionWaiter struct {
	org      string
	admitted chan struct{} // closed once the waiter holds a slot
}

func newAdmission(cfg AdmissionConfig) *admission {
	return &admission{cfg: cfg, byOrg: map[string]int{}}
}

// acquire returns once org holds a start slot, with the function that
// gives it back. It fails with a *CapacityError when the queue is full or
// the wait (the configured bound, or ctx's deadline if sooner) runs out,
// and with ctx's error when the caller goes away. Durations are measured
// on the monotonic clock.
func (a *admission) acquire(ctx context.Context, org string) (release func(), err error) {
	if !a.cfg.Queue {
		return func() {}, nil
	}
	start := time.Now()
	defer func() { metrics.AdmissionWait(admissionOutcome(err), time.Since(start)) }()
	a.mu.Lock()
	if len(a.waiters) == 0 && a.active < a.slots() {
		a.take(org)
		a.mu.Unlock()
		return a.releaser(org), nil
	}
	if len(a.waiters) >= a.cfg.MaxQueue {
		a.mu.Unlock()
		return nil, &CapacityError{Reason: "start_queue_full"}
	}
	w := &admissionWaiter{org: org, admitted: make(chan struct{})}
	a.waiters = append(a.waiters, w)
	a.dispatch() // the load view may have changed
	a.mu.Unlock()

	timer := time.NewTimer(a.cfg.Wait)
	defer timer.Stop()
	select {
	case <-w.admitted:
		return a.releaser(org), nil
	case <-timer.C:
		err = &CapacityError{Reason: "start_queue_timeout"}
	case <-ctx.Done():
		err = ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			err = &CapacityError{Reason: "start_queue_timeout"}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-w.admitted: // admitted as the wait ended: give the slot back
		a.put(org)
		a.dispatch()
	default:
		a.remove(w)
		a.dispatch()
	}
	if ce, ok := err.(*CapacityError); ok {
		ce.Queued = time.Since(start)
	}
	return nil, err
}

// admissionOutcome labels an acquire's result for the metrics.
func admissionOutcome(err error) string {
	var ce *CapacityError
	switch {
	case err == nil:
		return "admitted"
	case errors.As(err, &ce) && ce.Reason == "start_queue_full":
		return "queue_full"
	case errors.As(err, &ce):
		return "timeout"
	}
	return "canceled"
}

// stats returns how many starts wait and how many hold a slot now.
func (a *admission) stats() (waiting, active int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.waiters), a.active
}

// slots is how many starts may run now. Callers hold mu.
func (a *admission) slots() int {
	if a.cfg.HostBusy != nil && a.cfg.HostBusy() {
		return max(a.cfg.SlotsSaturated, 1)
	}
	return max(a.cfg.Slots, 1)
}

// take and put count a slot in and out. Callers hold mu.
func (a *admission) take(org string) { a.active++; a.byOrg[org]++ }
func (a *admission) put(org string) {
	a.active--
	if a.byOrg[org]--; a.byOrg[org] <= 0 {
		delete(a.byOrg, org)
	}
}

func (a *admission) releaser(org string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.put(org)
			a.dispatch()
		})
	}
}

// dispatch admits waiters while slots are free: the earliest waiter of the
// org with the fewest starts in flight. Callers hold mu.
func (a *admission) dispatch() {
	for len(a.waiters) > 0 && a.active < a.slots() {
		best := 0
		for i, w := range a.waiters {
			if a.byOrg[w.org] < a.byOrg[a.waiters[best].org] {
				best = i
			}
		}
		w := a.waiters[best]
		a.remove(w)
		a.take(w.org)
		close(w.admitted)
	}
}

// remove drops w from the waiters. Callers hold mu.
func (a *admission) remove(w *admissionWaiter) {
	for i, x := range a.waiters {
		if x == w {
			a.waiters = append(a.waiters[:i], a.waiters[i+1:]...)
			return
		}
	}
}
