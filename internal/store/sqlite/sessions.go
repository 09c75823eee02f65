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
	"github.com/platinum-dev/platinum/internal/store/internal/checks"
	"github.com/platinum-dev/platinum/internal/store/internal/sqlstore"
)

// CreateSession inserts s with Version 1; ErrConflict if its ID exists or
// its context has a live session.
func (s *Store) CreateSession(ctx context.Context, ses store.Session) error {
	return s.write(ctx, func(tx *sql.Tx) error { return insertSession(ctx, tx, ses) })
}

func insertSession(ctx context.Context, tx *sql.Tx, ses store.Session) error {
	created := formatTime(ses.CreatedAt, now())
	updated := created
	if !ses.UpdatedAt.IsZero() {
		updated = sandbox.FormatTime(ses.UpdatedAt)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO sessions (`+sqlstore.SessionCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)`,
		ses.ID, ses.OrgID, ses.VaultID, ses.WorkflowID, ses.AgentSessionID, ses.Template, ses.SandboxID,
		string(ses.Status), ses.Reason, boolInt(ses.Warm), created, updated, optTime(ses.ReadyAt), optTime(ses.EndedAt))
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return fmt.Errorf("session %q: its context has a live session or the ID exists: %w", ses.ID, store.ErrConflict)
		}
		return fmt.Errorf("create session %q: %w", ses.ID, err)
	}
	return nil
}

// UpdateSession is a compare-and-swap on Version.
func (s *Store) UpdateSession(ctx context.Context, ses store.Session) (store.Session, error) {
	var out store.Session
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET status = ?, reason = ?, sandbox_id = ?, ready_at = ?,
				ended_at = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND version = ?`,
			string(ses.Status), ses.Reason, ses.SandboxID, optTime(ses.ReadyAt), optTime(ses.EndedAt),
			sandbox.FormatTime(now()), ses.ID, ses.Version)
		if err != nil {
			if strings.Contains(err.Error(), "UNIQUE constraint failed") {
				return fmt.Errorf("session %q: its context has another live session: %w", ses.ID, store.ErrConflict)
			}
			return fmt.Errorf("update session %q: %w", ses.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			cur, err := dec.Session(tx.QueryRowContext(ctx, `SELECT `+sqlstore.SessionCols+` FROM sessions WHERE id = ?`, ses.ID))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("session %q: %w", ses.ID, store.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("update session %q: %w", ses.ID, err)
			}
			return fmt.Errorf("session %q: version %d, stored %d: %w", ses.ID, ses.Version, cur.Version, store.ErrConflict)
		}
		out, err = dec.Session(tx.QueryRowContext(ctx, `SELECT `+sqlstore.SessionCols+` FROM sessions WHERE id = ?`, ses.ID))
		return err
	})
	if err != nil {
		return store.Session{}, err
	}
	return out, nil
}

// ClaimPoolSandbox moves the oldest claimable pooled sandbox to ses's org,
// inserts ses and records the claim as the pool's demand, in one write
// transaction: two claims never get the same sandbox, and a claim whose
// session cannot be inserted changes nothing.
func (s *Store) ClaimPoolSandbox(ctx context.Context, poolOrgID, template, projectID string, ses store.Session) (sandbox.Sandbox, store.Session, error) {
	var sb sandbox.Sandbox
	var out store.Session
	err := s.write(ctx, func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM sandboxes
			WHERE org_id = ? AND template = ? AND state = 'running' AND json_extract(metadata, '$.`+store.MetaPoolReady+`') = '1'
				AND json_extract(metadata, '$.`+store.MetaPool+`') = ?
			ORDER BY created_at, id LIMIT 1`, poolOrgID, template, store.PoolKey(template, "")).Scan(&id)
		if err := checks.PoolClaim(template, err, sql.ErrNoRows); err != nil {
			return err
		}
		meta, err := json.Marshal(map[string]string{store.MetaSessionID: ses.ID})
		if err != nil {
			return err
		}
		t := sandbox.FormatTime(now())
		if _, err := tx.ExecContext(ctx, `UPDATE sandboxes SET org_id = ?, project_id = ?, metadata = ?, version = version + 1, updated_at = ?
			WHERE id = ?`, ses.OrgID, projectID, string(meta), t, id); err != nil {
			return fmt.Errorf("claim %q: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tokens SET org_id = ?, project_id = ? WHERE sandbox_id = ?`, ses.OrgID, projectID, id); err != nil {
			return fmt.Errorf("claim %q: tokens: %w", id, err)
		}
		ses.SandboxID = id
		if err := insertSession(ctx, tx, ses); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, sqlstore.PoolClaimInsert, ses.ID, template, "", formatTime(ses.CreatedAt, now()), 1, 1); err != nil {
			return fmt.Errorf("claim %q: pool demand: %w", id, err)
		}
		if sb, err = getSandbox(ctx, tx, id); err != nil {
			return err
		}
		out, err = dec.Session(tx.QueryRowContext(ctx, `SELECT `+sqlstore.SessionCols+` FROM sessions WHERE id = ?`, ses.ID))
		return err
	})
	if err != nil {
		return sandbox.Sandbox{}, store.Session{}, err
	}
	return sb, out, nil
}

func optTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return sandbox.FormatTime(*t)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
