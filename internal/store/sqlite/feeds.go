package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/checks"
	"github.com/platinum-dev/platinum/internal/store/internal/sqlstore"
)

// CreateWebhook implements store.Store.
func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook) (store.Webhook, error) {
	w, evs, err := sqlstore.NewWebhook(w)
	if err != nil {
		return store.Webhook{}, err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM events`).Scan(&w.Cursor); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO webhooks (id, org_id, url, events, secret, cursor, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			w.ID, w.OrgID, w.URL, evs, w.Secret, w.Cursor, sandbox.FormatTime(w.CreatedAt))
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

// AdvanceWebhook implements store.Store.
func (s *Store) AdvanceWebhook(ctx context.Context, id string, from, to int64, eventIDs []int64) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		var orgID string
		var cursor int64
		err := tx.QueryRowContext(ctx, `SELECT org_id, cursor FROM webhooks WHERE id = ?`, id).Scan(&orgID, &cursor)
		if err := checks.WebhookCursor(id, cursor, from, err, sql.ErrNoRows); err != nil {
			return err
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

// DeleteArtifact implements store.Store.
func (s *Store) DeleteArtifact(ctx context.Context, orgID, id string) (store.Artifact, error) {
	var a store.Artifact
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		a, err = dec.Artifact(tx.QueryRowContext(ctx, `SELECT `+sqlstore.ArtifactCols+` FROM artifacts WHERE id = ? AND org_id = ?`, id, orgID))
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
