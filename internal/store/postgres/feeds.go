package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/checks"
	"github.com/platinum-dev/platinum/internal/store/internal/sqlstore"
)

// CreateWebhook implements store.Store. Its cursor is the newest visible
// event: every event committed later has a higher ID (events.go).
func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook) (store.Webhook, error) {
	w, evs, err := sqlstore.NewWebhook(w)
	if err != nil {
		return store.Webhook{}, err
	}
	err = s.pool.QueryRow(ctx, `INSERT INTO webhooks (`+sqlstore.WebhookCols+`)
		SELECT $1, $2, $3, $4, $5, coalesce(max(id), 0), $6 FROM events
		ON CONFLICT DO NOTHING RETURNING cursor`,
		w.ID, w.OrgID, w.URL, evs, w.Secret, w.CreatedAt).Scan(&w.Cursor)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Webhook{}, fmt.Errorf("webhook %q: already exists: %w", w.ID, store.ErrConflict)
	}
	if err != nil {
		return store.Webhook{}, wrap(fmt.Sprintf("create webhook %q", w.ID), err)
	}
	return w, nil
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
		if err := checks.WebhookCursor(id, cursor, from, err, pgx.ErrNoRows); err != nil {
			return err
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

// DeleteArtifact implements store.Store.
func (s *Store) DeleteArtifact(ctx context.Context, orgID, id string) (store.Artifact, error) {
	a, err := getOne(s.pool.QueryRow(ctx, `DELETE FROM artifacts WHERE id = $1 AND org_id = $2 RETURNING `+sqlstore.ArtifactCols, id, orgID),
		dec.Artifact, "artifact", id)
	if err != nil && !store.IsNotFound(err) {
		return store.Artifact{}, fmt.Errorf("delete artifact %q: %w", id, err)
	}
	return a, err
}
