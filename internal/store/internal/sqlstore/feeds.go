// This file is the part of the webhook, delivery and artifact stores
// that is the same in both SQL stores. Each store keeps what it does its
// own way: CreateWebhook and AdvanceWebhook (their cursor against the
// events table, under each store's locking), DeleteArtifact, and events.

package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// WebhookCols are the webhooks columns rowscan.Decoder.Webhook reads.
const WebhookCols = `id, org_id, url, events, secret, cursor, created_at`

// NewWebhook is w as CreateWebhook stores it: no events is an empty list,
// a zero CreatedAt is now. evs is the events' stored JSON.
func NewWebhook(w store.Webhook) (_ store.Webhook, evs string, err error) {
	if w.Events == nil {
		w.Events = []string{}
	}
	b, err := json.Marshal(w.Events)
	if err != nil {
		return store.Webhook{}, "", fmt.Errorf("create webhook %q: %w", w.ID, err)
	}
	w.CreatedAt = sqldb.Stored(w.CreatedAt)
	return w, string(b), nil
}

// GetWebhook implements store.Store.
func (s *Store) GetWebhook(ctx context.Context, orgID, id string) (store.Webhook, error) {
	return sqldb.One(ctx, s.db, s.db.Decoder().Webhook, "webhook", id,
		`SELECT `+WebhookCols+` FROM webhooks WHERE id = ? AND (? = '' OR org_id = ?)`, id, orgID, orgID)
}

// ListWebhooks implements store.Store.
func (s *Store) ListWebhooks(ctx context.Context, orgID string) ([]store.Webhook, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().Webhook, "list webhooks",
		`SELECT `+WebhookCols+` FROM webhooks WHERE (? = '' OR org_id = ?) ORDER BY created_at, id`, orgID, orgID)
}

// DeleteWebhook implements store.Store. Its deliveries go with it (ON
// DELETE CASCADE).
func (s *Store) DeleteWebhook(ctx context.Context, orgID, id string) error {
	return sqldb.DeleteOne(ctx, s.db, fmt.Sprintf("webhook %q", id),
		`DELETE FROM webhooks WHERE id = ? AND org_id = ?`, id, orgID)
}

const deliveryCols = `d.id, d.webhook_id, d.org_id, d.event_id, d.status, d.attempts, d.next_attempt_at,
	d.last_status, d.last_error, d.created_at, d.updated_at`

func (s *Store) queryDeliveries(ctx context.Context, withEvent bool, query string, args ...any) ([]store.Delivery, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().Delivery(withEvent), "deliveries", query, args...)
}

// DueDeliveries implements store.Store. (SQLite keeps times in one fixed
// format, so comparing its strings compares the instants.)
func (s *Store) DueDeliveries(ctx context.Context, at time.Time, limit int) ([]store.Delivery, error) {
	return s.queryDeliveries(ctx, true, `SELECT `+deliveryCols+`, e.id, e.org_id, e.sandbox_id, e.type, e.data, e.created_at
		FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
		WHERE d.status = 'pending' AND d.next_attempt_at <= ? ORDER BY d.next_attempt_at, d.id LIMIT ?`,
		s.db.Time(at), s.db.Limit(limit))
}

// UpdateDelivery implements store.Store.
func (s *Store) UpdateDelivery(ctx context.Context, d store.Delivery) error {
	n, err := s.db.Exec(ctx, `UPDATE webhook_deliveries SET status = ?, attempts = ?, next_attempt_at = ?,
		last_status = ?, last_error = ?, updated_at = ? WHERE id = ?`,
		string(d.Status), d.Attempts, s.db.Time(sqldb.Stored(d.NextAttemptAt)), d.LastStatus, d.LastError,
		s.db.Time(sqldb.Now()), d.ID)
	if err != nil {
		return s.db.Err(fmt.Sprintf("update delivery %d", d.ID), err)
	}
	return sqldb.Found(n, fmt.Sprintf("delivery %d", d.ID))
}

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, orgID, webhookID string, limit int) ([]store.Delivery, error) {
	if _, err := s.GetWebhook(ctx, orgID, webhookID); err != nil {
		return nil, err
	}
	return s.queryDeliveries(ctx, false, `SELECT `+deliveryCols+` FROM webhook_deliveries d
		WHERE d.webhook_id = ? ORDER BY d.id DESC LIMIT ?`, webhookID, s.db.Limit(limit))
}

// PruneDeliveries implements store.Store.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.db.Exec(ctx, `DELETE FROM webhook_deliveries WHERE status <> 'pending' AND updated_at < ?`, s.db.Time(before))
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return n, nil
}

// ArtifactCols are the artifacts columns rowscan.Decoder.Artifact reads.
const ArtifactCols = `id, org_id, sandbox_id, name, path, kind, content_type, size_bytes, sha256, bucket, object_key, created_at`

// CreateArtifact implements store.Store.
func (s *Store) CreateArtifact(ctx context.Context, a store.Artifact) (store.Artifact, error) {
	a.CreatedAt = sqldb.Stored(a.CreatedAt)
	n, err := s.db.Exec(ctx, `INSERT INTO artifacts (`+ArtifactCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`,
		a.ID, a.OrgID, a.SandboxID, a.Name, a.Path, string(a.Kind), a.ContentType, a.SizeBytes, a.SHA256,
		a.Bucket, a.Key, s.db.Time(a.CreatedAt))
	if err != nil {
		return store.Artifact{}, s.db.Err(fmt.Sprintf("create artifact %q", a.ID), err)
	}
	if n == 0 {
		return store.Artifact{}, fmt.Errorf("artifact %q: already exists: %w", a.ID, store.ErrConflict)
	}
	return a, nil
}

// GetArtifact implements store.Store.
func (s *Store) GetArtifact(ctx context.Context, orgID, id string) (store.Artifact, error) {
	return sqldb.One(ctx, s.db, s.db.Decoder().Artifact, "artifact", id,
		`SELECT `+ArtifactCols+` FROM artifacts WHERE id = ? AND org_id = ?`, id, orgID)
}

// ListArtifacts implements store.Store.
func (s *Store) ListArtifacts(ctx context.Context, orgID, sandboxID string) ([]store.Artifact, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().Artifact, "list artifacts", `SELECT `+ArtifactCols+` FROM artifacts
		WHERE org_id = ? AND (? = '' OR sandbox_id = ?) ORDER BY created_at DESC, id DESC`, orgID, sandboxID, sandboxID)
}
