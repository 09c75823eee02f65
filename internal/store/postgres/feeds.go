package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/store"
)

const webhookCols = `id, org_id, url, events, secret, cursor, created_at`

// CreateWebhook implements store.Store. Its cursor is the newest visible
// event: every event committed later has a higher ID (events.go).
func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook) (store.Webhook, error) {
	if w.Events == nil {
		w.Events = []string{}
	}
	evs, err := json.Marshal(w.Events)
	if err != nil {
		return store.Webhook{}, fmt.Errorf("create webhook %q: %w", w.ID, err)
	}
	w.CreatedAt = ts(w.CreatedAt, now())
	err = s.pool.QueryRow(ctx, `INSERT INTO webhooks (`+webhookCols+`)
		SELECT $1, $2, $3, $4, $5, coalesce(max(id), 0), $6 FROM events
		ON CONFLICT DO NOTHING RETURNING cursor`,
		w.ID, w.OrgID, w.URL, string(evs), w.Secret, w.CreatedAt).Scan(&w.Cursor)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Webhook{}, fmt.Errorf("webhook %q: already exists: %w", w.ID, store.ErrConflict)
	}
	if err != nil {
		return store.Webhook{}, wrap(fmt.Sprintf("create webhook %q", w.ID), err)
	}
	return w, nil
}

// GetWebhook implements store.Store.
func (s *Store) GetWebhook(ctx context.Context, orgID, id string) (store.Webhook, error) {
	return getOne(s.pool.QueryRow(ctx, `SELECT `+webhookCols+` FROM webhooks WHERE id = $1 AND ($2 = '' OR org_id = $2)`,
		id, orgID), dec.Webhook, "webhook", id)
}

// ListWebhooks implements store.Store.
func (s *Store) ListWebhooks(ctx context.Context, orgID string) ([]store.Webhook, error) {
	out, err := queryAll(ctx, s.pool, dec.Webhook, `SELECT `+webhookCols+` FROM webhooks WHERE ($1 = '' OR org_id = $1)
		ORDER BY created_at, id`, orgID)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

// DeleteWebhook implements store.Store. Its deliveries go with it (ON
// DELETE CASCADE).
func (s *Store) DeleteWebhook(ctx context.Context, orgID, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhooks WHERE id = $1 AND org_id = $2`, id, orgID)
	if err != nil {
		return fmt.Errorf("delete webhook %q: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("webhook %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// AdvanceWebhook implements store.Store. The webhook row is locked for the
// cursor's compare-and-swap, and the queued events are key-share locked so
// PruneEvents cannot delete one under a new pending delivery (an event
// already pruned is not queued: nothing could send it).
func (s *Store) AdvanceWebhook(ctx context.Context, id string, from, to int64, eventIDs []int64) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var orgID string
		var cursor int64
		err := tx.QueryRow(ctx, `SELECT org_id, cursor FROM webhooks WHERE id = $1 FOR UPDATE`, id).Scan(&orgID, &cursor)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("webhook %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if cursor != from {
			return fmt.Errorf("webhook %q: cursor is %d, not %d: %w", id, cursor, from, store.ErrConflict)
		}
		if len(eventIDs) > 0 {
			t := now()
			if _, err := tx.Exec(ctx, `WITH ev AS (SELECT id FROM events WHERE id = ANY($3) ORDER BY id FOR KEY SHARE)
				INSERT INTO webhook_deliveries (webhook_id, org_id, event_id, status, next_attempt_at, created_at, updated_at)
				SELECT $1, $2, ev.id, 'pending', $4, $4, $4 FROM ev ORDER BY ev.id
				ON CONFLICT DO NOTHING`, id, orgID, eventIDs, t); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE webhooks SET cursor = $1 WHERE id = $2`, to, id)
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
	out, err := queryAll(ctx, s.pool, dec.Delivery(withEvent), query, args...)
	if err != nil {
		return nil, fmt.Errorf("deliveries: %w", err)
	}
	return out, nil
}

// DueDeliveries implements store.Store.
func (s *Store) DueDeliveries(ctx context.Context, at time.Time, limit int) ([]store.Delivery, error) {
	return s.queryDeliveries(ctx, true, `SELECT `+deliveryCols+`, e.id, e.org_id, e.sandbox_id, e.type, e.data, e.created_at
		FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
		WHERE d.status = 'pending' AND d.next_attempt_at <= $1 ORDER BY d.next_attempt_at, d.id LIMIT $2`,
		at, limitArg(limit))
}

// UpdateDelivery implements store.Store.
func (s *Store) UpdateDelivery(ctx context.Context, d store.Delivery) error {
	tag, err := s.pool.Exec(ctx, `UPDATE webhook_deliveries SET status = $1, attempts = $2, next_attempt_at = $3,
		last_status = $4, last_error = $5, updated_at = $6 WHERE id = $7`,
		string(d.Status), d.Attempts, ts(d.NextAttemptAt, now()), d.LastStatus, d.LastError, now(), d.ID)
	if err != nil {
		return wrap(fmt.Sprintf("update delivery %d", d.ID), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delivery %d: %w", d.ID, store.ErrNotFound)
	}
	return nil
}

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, orgID, webhookID string, limit int) ([]store.Delivery, error) {
	if _, err := s.GetWebhook(ctx, orgID, webhookID); err != nil {
		return nil, err
	}
	return s.queryDeliveries(ctx, false, `SELECT `+deliveryCols+` FROM webhook_deliveries d
		WHERE d.webhook_id = $1 ORDER BY d.id DESC LIMIT $2`, webhookID, limitArg(limit))
}

// PruneDeliveries implements store.Store.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE status <> 'pending' AND updated_at < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return tag.RowsAffected(), nil
}

const artifactCols = `id, org_id, sandbox_id, name, path, kind, content_type, size_bytes, sha256, bucket, object_key, created_at`

// CreateArtifact implements store.Store.
func (s *Store) CreateArtifact(ctx context.Context, a store.Artifact) (store.Artifact, error) {
	a.CreatedAt = ts(a.CreatedAt, now())
	tag, err := s.pool.Exec(ctx, `INSERT INTO artifacts (`+artifactCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING`,
		a.ID, a.OrgID, a.SandboxID, a.Name, a.Path, string(a.Kind), a.ContentType, a.SizeBytes, a.SHA256,
		a.Bucket, a.Key, a.CreatedAt)
	if err != nil {
		return store.Artifact{}, wrap(fmt.Sprintf("create artifact %q", a.ID), err)
	}
	if err := conflictUnlessInserted(tag, "artifact", a.ID); err != nil {
		return store.Artifact{}, err
	}
	return a, nil
}

// GetArtifact implements store.Store.
func (s *Store) GetArtifact(ctx context.Context, orgID, id string) (store.Artifact, error) {
	return getOne(s.pool.QueryRow(ctx, `SELECT `+artifactCols+` FROM artifacts WHERE id = $1 AND org_id = $2`, id, orgID),
		dec.Artifact, "artifact", id)
}

// ListArtifacts implements store.Store.
func (s *Store) ListArtifacts(ctx context.Context, orgID, sandboxID string) ([]store.Artifact, error) {
	out, err := queryAll(ctx, s.pool, dec.Artifact, `SELECT `+artifactCols+` FROM artifacts
		WHERE org_id = $1 AND ($2 = '' OR sandbox_id = $2) ORDER BY created_at DESC, id DESC`, orgID, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("list artifacts: %w", err)
	}
	return out, nil
}

// DeleteArtifact implements store.Store.
func (s *Store) DeleteArtifact(ctx context.Context, orgID, id string) (store.Artifact, error) {
	a, err := getOne(s.pool.QueryRow(ctx, `DELETE FROM artifacts WHERE id = $1 AND org_id = $2 RETURNING `+artifactCols, id, orgID),
		dec.Artifact, "artifact", id)
	if err != nil && !store.IsNotFound(err) {
		return store.Artifact{}, fmt.Errorf("delete artifact %q: %w", id, err)
	}
	return a, err
}
