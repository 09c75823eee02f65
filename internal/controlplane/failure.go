package controlplane

import (
	"context"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// A sandbox that ends failed holds nothing on its host but its disk: no
// process, mount, loop device, address or cgroup. Every path into failed
// goes through failCreate (a create: everything goes, it has no data) or
// markFailed (the rest: the disk stays, so a start can boot it again).
// A cleanup that fails is retried a few times and then left to the
// reconciler's sweep (sweep.go), which releases failed sandboxes that
// still hold something.

// cleanupAttempts and cleanupBackoff bound the retries of a failed path's
// host cleanup before the sweep takes over.
const (
	cleanupAttempts = 3
	cleanupBackoff  = 500 * time.Millisecond
)

// failCreate removes everything a failed create made on its host and
// records it failed with reason. The caller holds the sandbox's lock.
func (s *Service) failCreate(ctx context.Context, id, reason string) {
	ctx = context.WithoutCancel(ctx)
	s.retryCleanup(ctx, id, "destroy after a failed create", func() error { return s.host.Destroy(ctx, id) })
	if _, _, err := s.transition(ctx, id, sandbox.StateCreating, sandbox.StateFailed, func(sb *sandbox.Sandbox) {
		sb.Reason = reason
	}); err != nil {
		s.log.ErrorContext(ctx, "record failure", "sandbox", id, "err", err)
	}
}

// markFailed moves the sandbox from `from` to failed with reason (and
// mutate's changes), then frees what it holds on its host, keeping its
// disk. The caller holds the sandbox's lock. It reports whether the
// sandbox was moved (false: it was no longer in from).
func (s *Service) markFailed(ctx context.Context, id string, from sandbox.State, reason string, mutate func(*sandbox.Sandbox)) bool {
	ctx = context.WithoutCancel(ctx)
	_, ok, err := s.transition(ctx, id, from, sandbox.StateFailed, func(sb *sandbox.Sandbox) {
		sb.Reason = reason
		if mutate != nil {
			mutate(sb)
		}
	})
	if err != nil {
		s.log.ErrorContext(ctx, "record failure", "sandbox", id, "err", err)
	}
	if !ok {
		return false
	}
	s.forgetAgent(id)
	s.releaseHost(ctx, id)
	return true
}

// releaseHost frees what the sandbox holds on its host but its disk
// (hostapi.Releaser), retrying a few times.
func (s *Service) releaseHost(ctx context.Context, id string) {
	r, ok := s.host.(hostapi.Releaser)
	if !ok {
		return
	}
	s.retryCleanup(ctx, id, "release after a failure", func() error { return r.Release(ctx, id) })
}

// retryCleanup calls fn up to cleanupAttempts times, logging the last
// error: the sweep finishes what it could not.
func (s *Service) retryCleanup(ctx context.Context, id, what string, fn func() error) {
	var err error
	for i := range cleanupAttempts {
		if err = fn(); err == nil {
			return
		}
		if i < cleanupAttempts-1 {
			select {
			case <-time.After(cleanupBackoff << i):
			case <-s.bg.Context().Done():
				return
			}
		}
	}
	s.log.WarnContext(ctx, what+" failed; the reconciler's sweep retries", "sandbox", id, "err", err)
}
