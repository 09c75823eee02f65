// This file is the read side of the event log, the same in both
// SQL stores. Each store keeps the write side (AddEvent, PruneEvents and
// its listeners), whose ordering and locking differ.

package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// EventCols are the events columns rowscan.Decoder.Event reads.
const EventCols = `id, org_id, sandbox_id, type, data, created_at`

// Events returns events with ID > afterID, oldest first, at most limit
// (<= 0: all).
func (s *Store) Events(ctx context.Context, afterID int64, limit int) ([]store.Event, error) {
	return s.queryEvents(ctx, `SELECT `+EventCols+` FROM events WHERE id > ? ORDER BY id LIMIT ?`, afterID, s.db.Limit(limit))
}

// SandboxEvents implements store.Store.
func (s *Store) SandboxEvents(ctx context.Context, sandboxID string) ([]store.Event, error) {
	return s.queryEvents(ctx, `SELECT `+EventCols+` FROM events WHERE sandbox_id = ? ORDER BY id`, sandboxID)
}

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, q store.EventQuery) ([]store.Event, error) {
	where := []string{"org_id = ?", "id > ?"}
	args := []any{q.OrgID, q.AfterID}
	if q.SandboxID != "" {
		where = append(where, "sandbox_id = ?")
		args = append(args, q.SandboxID)
	}
	if len(q.Types) > 0 {
		cond, targs := s.db.AnyOf("type", q.Types)
		where, args = append(where, cond), append(args, targs...)
	}
	args = append(args, s.db.Limit(q.Limit))
	return s.queryEvents(ctx, `SELECT `+EventCols+` FROM events WHERE `+strings.Join(where, " AND ")+` ORDER BY id LIMIT ?`, args...)
}

func (s *Store) queryEvents(ctx context.Context, query string, args ...any) ([]store.Event, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().Event, "events", query, args...)
}

// EventsPrunedThrough implements store.Store.
func (s *Store) EventsPrunedThrough(ctx context.Context) (int64, error) {
	var id int64
	if err := s.db.QueryRow(ctx, `SELECT pruned_through FROM event_retention WHERE id = 1`).Scan(&id); err != nil {
		return 0, fmt.Errorf("events pruned through: %w", err)
	}
	return id, nil
}
