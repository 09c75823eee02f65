package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/platinum-dev/platinum/internal/store/internal/codec"
)

// The event ID is the one cursor of the event stream, SSE, ?after= and
// every webhook's fan-out (docs/ARCHITECTURE.md, "Events"): a reader that
// has seen ID n never looks below n again. A plain identity column breaks
// that on a server database: transaction A takes ID 11, B takes 12, B
// commits first, a reader sees 12 and moves its cursor past 11, which A
// then commits, unseen forever.
//
// So an ID is taken only under lockEvents, a transaction-scoped advisory
// lock held until the transaction ends. A holder of ID 11 commits (or
// aborts) before anyone can take 12, and PostgreSQL makes a commit visible
// before it releases the transaction's locks, so whenever ID 12 is
// visible, 11 is already visible (or never will be). Event IDs therefore
// become visible in ID order, and "ID > cursor" skips nothing.
//
// The cost is that transactions appending events commit one at a time
// from the append on. insertEvent is always a transaction's last write,
// so the lock is held only for the insert and the commit.

// insertEvent appends an event in tx: the events lock, then the row. It
// must be tx's last write.
func insertEvent(ctx context.Context, tx pgx.Tx, orgID, sandboxID, typ, data string, at time.Time) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockEvents); err != nil {
		return fmt.Errorf("event lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO events (org_id, sandbox_id, type, data, created_at) VALUES ($1, $2, $3, $4, $5)`,
		orgID, sandboxID, typ, data, at); err != nil {
		return wrap("event", err)
	}
	// Wakes the event readers of every process (ListenEvents), at commit.
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, eventsChannel); err != nil {
		return fmt.Errorf("event notify: %w", err)
	}
	return nil
}

// eventsChannel is the NOTIFY channel of event appends.
const eventsChannel = "pt_events"

// ListenEvents calls wake whenever any process commits an event (a
// NOTIFY sent by the append, delivered at commit), until ctx ends. It
// holds a connection of its own, outside the pool; when that connection
// fails it calls wake (a notification may have been missed) and connects
// again after a second. Readers still poll as a backstop.
func (s *Store) ListenEvents(ctx context.Context, wake func()) {
	for ctx.Err() == nil {
		if err := s.listen(ctx, wake); err != nil && ctx.Err() == nil {
			s.logger.Warn("listen for events", "err", err)
			wake()
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (s *Store) listen(ctx context.Context, wake func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		return err
	}
	wake() // what was committed while not listening
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}

// AddEvent appends one event row.
func (s *Store) AddEvent(ctx context.Context, orgID, sandboxID, typ string, data any) error {
	b, err := codec.EventData(data)
	if err != nil {
		return fmt.Errorf("add event: %w", err)
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		return insertEvent(ctx, tx, orgID, sandboxID, typ, b, now())
	})
	if err != nil {
		return fmt.Errorf("add event: %w", err)
	}
	return nil
}

// limitArg is a LIMIT parameter: NULL (no limit) for limit <= 0.
func limitArg(limit int) any {
	if limit <= 0 {
		return nil
	}
	return limit
}

// PruneEvents implements store.Store. It locks the candidate events
// first (FOR UPDATE, in ID order) and only then, in a later statement that
// sees every committed delivery, deletes those no pending delivery needs:
// AdvanceWebhook key-share-locks the events it queues, so a delivery
// queued concurrently either committed before the check or finds its
// event gone.
func (s *Store) PruneEvents(ctx context.Context, before time.Time, limit int) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		const kept = `NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.status = 'pending')
			AND NOT (e.type IN ('created', 'state_changed', 'resized') AND EXISTS (SELECT 1 FROM sandboxes s WHERE s.id = e.sandbox_id))`
		rows, err := tx.Query(ctx, `SELECT id FROM events e WHERE created_at < $1 AND `+kept+`
			ORDER BY id LIMIT $2 FOR UPDATE`, before, limitArg(limit))
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		rows, err = tx.Query(ctx, `DELETE FROM events e WHERE id = ANY($1) AND `+kept+` RETURNING id`, ids)
		if err != nil {
			return err
		}
		deleted, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(deleted) == 0 {
			return err
		}
		n = int64(len(deleted))
		_, err = tx.Exec(ctx, `UPDATE event_retention SET pruned_through = greatest(pruned_through, $1) WHERE id = 1`,
			slices.Max(deleted))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	return n, nil
}
