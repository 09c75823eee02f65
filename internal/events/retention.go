package events

import (
	"context"
	"fmt"
	"time"
)

// Event retention: events older than Config.EventRetention are
// pruned by the webhook dispatcher's hourly housekeeping, except those a
// pending webhook delivery still needs (a delivery is always sent with its
// event) and the usage history of sandboxes whose record still exists
// (usage is replayed from it). The store keeps a watermark, the highest ID
// ever pruned, so a reader whose cursor is older learns that it missed
// events instead of silently skipping them.

// EventsPrunedError is a feed cursor (after, Last-Event-ID) older than
// what retention has pruned: events after it may be gone. The reader
// resyncs (lists what it tracks) and resumes from PrunedThrough.
type EventsPrunedError struct {
	After, PrunedThrough int64
}

// Error implements error.
func (e *EventsPrunedError) Error() string {
	return fmt.Sprintf("events after %d were pruned by retention up to ID %d; resync, then resume with after=%d", e.After, e.PrunedThrough, e.PrunedThrough)
}

// pruneBatch bounds one delete transaction, so the single SQLite writer is
// not held long.
const pruneBatch = 5000

// pruneEvents deletes events past the retention in batches.
func (s *Service) pruneEvents(ctx context.Context) {
	ret := s.cfg.EventRetention
	if ret <= 0 {
		return
	}
	before := time.Now().Add(-ret)
	var total int64
	for ctx.Err() == nil {
		n, err := s.store.PruneEvents(ctx, before, pruneBatch)
		if err != nil {
			s.log.WarnContext(ctx, "events: prune", "err", err)
			return
		}
		total += n
		if n < pruneBatch {
			break
		}
	}
	if total > 0 {
		s.log.InfoContext(ctx, "events: pruned past retention", "count", total, "retention", ret)
	}
}

// checkCursor refuses a cursor older than the pruned-through watermark.
// after = 0 means "from the oldest kept event" and is always accepted.
func (s *Service) checkCursor(ctx context.Context, after int64) error {
	if after == 0 {
		return nil
	}
	through, err := s.store.EventsPrunedThrough(ctx)
	if err != nil {
		return err
	}
	if after < through {
		return &EventsPrunedError{After: after, PrunedThrough: through}
	}
	return nil
}
