package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, q store.EventQuery) ([]store.Event, error) {
	where := []string{"org_id = ?", "id > ?"}
	args := []any{q.OrgID, q.AfterID}
	if q.SandboxID != "" {
		where = append(where, "sandbox_id = ?")
		args = append(args, q.SandboxID)
	}
	if len(q.Types) > 0 {
		where = append(where, "type IN (?"+strings.Repeat(", ?", len(q.Types)-1)+")")
		for _, t := range q.Types {
			args = append(args, t)
		}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = -1
	}
	args = append(args, limit)
	return s.queryEvents(ctx, `SELECT id, org_id, sandbox_id, type, data, created_at FROM events WHERE `+
		strings.Join(where, " AND ")+` ORDER BY id LIMIT ?`, args...)
}

// CreateWebhook implements store.Store.
func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook) (store.Webhook, error) {
	if w.Events == nil {
		w.Events = []string{}
	}
	evs, err := json.Marshal(w.Events)
	if err != nil {
		return store.Webhook{}, fmt.Errorf("create webhook %q: %w", w.ID, err)
	}
	w.CreatedAt = stored(w.CreatedAt)
	err = s.write(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM events`).Scan(&w.Cursor); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO webhooks (id, org_id, url, events, secret, cursor, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			w.ID, w.OrgID, w.URL, string(evs), w.Secret, w.Cursor, sandbox.FormatTime(w.CreatedAt))
		if err != nil {
			return err
		}
		return conflictUnlessInserted(res, "webhook", w.ID)
	})
	if err != nil {
		return store.Webhook{}, fmt.Errorf("create webhook %q: %w", w.ID, err)
	}
	return w, nil
}

// stored is t as the store keeps it; a zero t means now.
func stored(t time.Time) time.Time {
	if t.IsZero() {
		return now()
	}
	return t.UTC().Truncate(time.Microsecond)
}

const webhookCols = `id, org_id, url, events, secret, cursor, created_at`

// GetWebhook implements store.Store.
func (s *Store) GetWebhook(ctx context.Context, orgID, id string) (store.Webhook, error) {
	return getOne(s.r.QueryRowContext(ctx, `SELECT `+webhookCols+` FROM webhooks WHERE id = ? AND (? = '' OR org_id = ?)`,
		id, orgID, orgID), dec.Webhook, "webhook", id)
}

// ListWebhooks implements store.Store.
func (s *Store) ListWebhooks(ctx context.Context, orgID string) ([]store.Webhook, error) {
	out, err := queryAll(ctx, s.r, dec.Webhook, `SELECT `+webhookCols+` FROM webhooks WHERE (? = '' OR org_id = ?) ORDER BY created_at, id`,
		orgID, orgID)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

// DeleteWebhook implements store.Store. Its deliveries go with it (ON
// DELETE CASCADE).
func (s *Store) DeleteWebhook(ctx context.Context, orgID, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ? AND org_id = ?`, id, orgID)
	if err != nil {
		return fmt.Errorf("delete webhook %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("webhook %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// AdvanceWebhook implements store.Store.
func (s *Store) AdvanceWebhook(ctx context.Context, id string, from, to int64, eventIDs []int64) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		var orgID string
		var cursor int64
		err := tx.QueryRowContext(ctx, `SELECT org_id, cursor FROM webhooks WHERE id = ?`, id).Scan(&orgID, &cursor)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("webhook %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if cursor != from {
			return fmt.Errorf("webhook %q: cursor is %d, not %d: %w", id, cursor, from, store.ErrConflict)
		}
		t := sandbox.FormatTime(now())
		for _, ev := range eventIDs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries
				(webhook_id, org_id, event_id, status, next_attempt_at, created_at, updated_at)
				VALUES (?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT DO NOTHING`, id, orgID, ev, t, t, t); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE webhooks SET cursor = ? WHERE id = ?`, to, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("advance webhook %q: %w", id, err)
	}
	return nil
}

const deliveryCols = `d.id, d.webhook_id, d.org_id, d.event_id, d.status, d.attempts, d.next_attempt_at,
	d.last_status, d.last_error, d.created_at, d.updated_at`

func (s *Store) queryDeliveries(ctx context.Context, withEvent bool, query string, args ...any) ([]store.Delivery, error) {
	scan := dec.Delivery(withEvent)
	out, err := queryAll(ctx, s.r, scan, query, args...)
	if err != nil {
		return nil, fmt.Errorf("deliveries: %w", err)
	}
	return out, nil
}

// DueDeliveries implements store.Store. Times are stored in one fixed
// format, so comparing the strings compares the instants.
func (s *Store) DueDeliveries(ctx context.Context, at time.Time, limit int) ([]store.Delivery, error) {
	if limit <= 0 {
		limit = -1
	}
	return s.queryDeliveries(ctx, true, `SELECT `+deliveryCols+`, e.id, e.org_id, e.sandbox_id, e.type, e.data, e.created_at
		FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
		WHERE d.status = 'pending' AND d.next_attempt_at <= ? ORDER BY d.next_attempt_at, d.id LIMIT ?`,
		sandbox.FormatTime(at), limit)
}

// UpdateDelivery implements store.Store.
func (s *Store) UpdateDelivery(ctx context.Context, d store.Delivery) error {
	res, err := s.w.ExecContext(ctx, `UPDATE webhook_deliveries SET status = ?, attempts = ?, next_attempt_at = ?,
		last_status = ?, last_error = ?, updated_at = ? WHERE id = ?`,
		string(d.Status), d.Attempts, sandbox.FormatTime(stored(d.NextAttemptAt)), d.LastStatus, d.LastError,
		sandbox.FormatTime(now()), d.ID)
	if err != nil {
		return fmt.Errorf("update delivery %d: %w", d.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("delivery %d: %w", d.ID, store.ErrNotFound)
	}
	return nil
}

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, orgID, webhookID string, limit int) ([]store.Delivery, error) {
	if _, err := s.GetWebhook(ctx, orgID, webhookID); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = -1
	}
	return s.queryDeliveries(ctx, false, `SELECT `+deliveryCols+` FROM webhook_deliveries d
		WHERE d.webhook_id = ? ORDER BY d.id DESC LIMIT ?`, webhookID, limit)
}

// PruneDeliveries implements store.Store.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE status != 'pending' AND updated_at < ?`,
		sandbox.FormatTime(before))
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return res.RowsAffected()
}

// PruneEvents implements store.Store.
func (s *Store) PruneEvents(ctx context.Context, before time.Time, limit int) (int64, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		var top sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT max(id) FROM (SELECT id FROM events e WHERE created_at < ?
			AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.status = 'pending')
			AND NOT (type IN ('created', 'state_changed', 'resized') AND EXISTS (SELECT 1 FROM sandboxes s WHERE s.id = e.sandbox_id))
			ORDER BY id LIMIT ?)`, sandbox.FormatTime(before), limit).Scan(&top); err != nil {
			return err
		}
		if !top.Valid {
			return nil
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id <= ? AND created_at < ? AND id IN (SELECT id FROM events e WHERE id <= ?
			AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.status = 'pending')
			AND NOT (type IN ('created', 'state_changed', 'resized') AND EXISTS (SELECT 1 FROM sandboxes s WHERE s.id = e.sandbox_id)))`,
			top.Int64, sandbox.FormatTime(before), top.Int64)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE event_retention SET pruned_through = max(pruned_through, ?) WHERE id = 1`, top.Int64)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	return n, nil
}

// EventsPrunedThrough implements store.Store.
func (s *Store) EventsPrunedThrough(ctx context.Context) (int64, error) {
	var id int64
	if err := s.r.QueryRowContext(ctx, `SELECT pruned_through FROM event_retention WHERE id = 1`).Scan(&id); err != nil {
		return 0, fmt.Errorf("events pruned through: %w", err)
	}
	return id, nil
}

const artifactCols = `id, org_id, sandbox_id, name, path, kind, content_type, size_bytes, sha256, bucket, object_key, created_at`

// CreateArtifact implements store.Store.
func (s *Store) CreateArtifact(ctx context.Context, a store.Artifact) (store.Artifact, error) {
	a.CreatedAt = stored(a.CreatedAt)
	res, err := s.w.ExecContext(ctx, `INSERT INTO artifacts (`+artifactCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`,
		a.ID, a.OrgID, a.SandboxID, a.Name, a.Path, string(a.Kind), a.ContentType, a.SizeBytes, a.SHA256,
		a.Bucket, a.Key, sandbox.FormatTime(a.CreatedAt))
	if err != nil {
		return store.Artifact{}, fmt.Errorf("create artifact %q: %w", a.ID, err)
	}
	if err := conflictUnlessInserted(res, "artifact", a.ID); err != nil {
		return store.Artifact{}, err
	}
	return a, nil
}

// GetArtifact implements store.Store.
func (s *Store) GetArtifact(ctx context.Context, orgID, id string) (store.Artifact, error) {
	return getOne(s.r.QueryRowContext(ctx, `SELECT `+artifactCols+` FROM artifacts WHERE id = ? AND org_id = ?`, id, orgID), dec.Artifact, "artifact", id)
}

// ListArtifacts implements store.Store.
func (s *Store) ListArtifacts(ctx context.Context, orgID, sandboxID string) ([]store.Artifact, error) {
	out, err := queryAll(ctx, s.r, dec.Artifact, `SELECT `+artifactCols+` FROM artifacts
		WHERE org_id = ? AND (? = '' OR sandbox_id = ?) ORDER BY created_at DESC, id DESC`, orgID, sandboxID, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("list artifacts: %w", err)
	}
	return out, nil
}

// DeleteArtifact implements store.Store.
func (s *Store) DeleteArtifact(ctx context.Context, orgID, id string) (store.Artifact, error) {
	var a store.Artifact
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		a, err = dec.Artifact(tx.QueryRowContext(ctx, `SELECT `+artifactCols+` FROM artifacts WHERE id = ? AND org_id = ?`, id, orgID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("artifact %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM artifacts WHERE id = ?`, id)
		return err
	})
	if err != nil {
		return store.Artifact{}, fmt.Errorf("delete artifact %q: %w", id, err)
	}
	return a, nil
}
