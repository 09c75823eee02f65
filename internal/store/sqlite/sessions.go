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

const sessionCols = `id, org_id, vault_id, workflow_id, agent_session_id, template, sandbox_id, status, reason,
	warm, version, created_at, updated_at, ready_at, ended_at`

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
	_, err := tx.ExecContext(ctx, `INSERT INTO sessions (`+sessionCols+`)
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

// GetSession returns the session with that ID in orgID (any org if empty).
func (s *Store) GetSession(ctx context.Context, orgID, id string) (store.Session, error) {
	ses, err := getOne(s.r.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id), dec.Session, "session", id)
	if err == nil && orgID != "" && ses.OrgID != orgID {
		return store.Session{}, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return ses, err
}

// ContextSession returns the context's live session, else its newest one.
func (s *Store) ContextSession(ctx context.Context, orgID, vaultID, workflowID, agentSessionID string) (store.Session, error) {
	ses, err := dec.Session(s.r.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions
		WHERE org_id = ? AND vault_id = ? AND workflow_id = ? AND agent_session_id = ?
		ORDER BY status IN ('provisioning', 'ready', 'stopping') DESC, created_at DESC, id DESC LIMIT 1`,
		orgID, vaultID, workflowID, agentSessionID))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Session{}, fmt.Errorf("context session: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Session{}, fmt.Errorf("context session: %w", err)
	}
	return ses, nil
}

// SessionsByContextID returns the org's sessions owned by a workflow or
// agent session with that ID, newest first.
func (s *Store) SessionsByContextID(ctx context.Context, orgID, id string) ([]store.Session, error) {
	return s.querySessions(ctx, `SELECT `+sessionCols+` FROM sessions
		WHERE org_id = ? AND (workflow_id = ? OR agent_session_id = ?) ORDER BY created_at DESC, id DESC LIMIT 10`,
		orgID, id, id)
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
			cur, err := dec.Session(tx.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, ses.ID))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("session %q: %w", ses.ID, store.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("update session %q: %w", ses.ID, err)
			}
			return fmt.Errorf("session %q: version %d, stored %d: %w", ses.ID, ses.Version, cur.Version, store.ErrConflict)
		}
		out, err = dec.Session(tx.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, ses.ID))
		return err
	})
	if err != nil {
		return store.Session{}, err
	}
	return out, nil
}

// ListSessions returns the org's sessions, newest first.
func (s *Store) ListSessions(ctx context.Context, orgID string, all bool) ([]store.Session, error) {
	q := `SELECT ` + sessionCols + ` FROM sessions WHERE org_id = ?`
	if !all {
		q += ` AND status IN ('provisioning', 'ready', 'stopping')`
	}
	return s.querySessions(ctx, q+` ORDER BY created_at DESC, id DESC`, orgID)
}

// SessionsInStatuses returns every session in the statuses, oldest first.
func (s *Store) SessionsInStatuses(ctx context.Context, statuses ...store.SessionStatus) ([]store.Session, error) {
	if len(statuses) == 0 {
		return []store.Session{}, nil
	}
	args := make([]any, len(statuses))
	for i, st := range statuses {
		args[i] = string(st)
	}
	return s.querySessions(ctx, `SELECT `+sessionCols+` FROM sessions WHERE status IN (?`+
		strings.Repeat(", ?", len(statuses)-1)+`) ORDER BY created_at, id`, args...)
}

// ClaimPoolSandbox moves the oldest claimable pooled sandbox to ses's org
// and inserts ses, in one write transaction: two claims never get the
// same sandbox, and a claim whose session cannot be inserted changes
// nothing.
func (s *Store) ClaimPoolSandbox(ctx context.Context, poolOrgID, template, projectID string, ses store.Session) (sandbox.Sandbox, store.Session, error) {
	var sb sandbox.Sandbox
	var out store.Session
	err := s.write(ctx, func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM sandboxes
			WHERE org_id = ? AND template = ? AND state = 'running' AND json_extract(metadata, '$.`+store.MetaPoolReady+`') = '1'
			ORDER BY created_at, id LIMIT 1`, poolOrgID, template).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("pool %q: no ready sandbox: %w", template, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("claim from pool %q: %w", template, err)
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
		if sb, err = getSandbox(ctx, tx, id); err != nil {
			return err
		}
		out, err = dec.Session(tx.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, ses.ID))
		return err
	})
	if err != nil {
		return sandbox.Sandbox{}, store.Session{}, err
	}
	return sb, out, nil
}

// PutPool inserts or replaces a pool setting.
func (s *Store) PutPool(ctx context.Context, p store.Pool) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO pools (template, min_ready, max, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (template) DO UPDATE SET min_ready = excluded.min_ready, max = excluded.max, updated_at = excluded.updated_at`,
		p.Template, p.MinReady, p.Max, formatTime(p.UpdatedAt, now()))
	if err != nil {
		return fmt.Errorf("put pool %q: %w", p.Template, err)
	}
	return nil
}

// ListPools returns every pool setting by template.
func (s *Store) ListPools(ctx context.Context) ([]store.Pool, error) {
	out, err := queryAll(ctx, s.r, func(sc scanner) (store.Pool, error) {
		var p store.Pool
		var updated string
		if err := sc.Scan(&p.Template, &p.MinReady, &p.Max, &updated); err != nil {
			return store.Pool{}, err
		}
		var err error
		p.UpdatedAt, err = parseTime(updated)
		return p, err
	}, `SELECT template, min_ready, max, updated_at FROM pools ORDER BY template`)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	return out, nil
}

func (s *Store) querySessions(ctx context.Context, q string, args ...any) ([]store.Session, error) {
	out, err := queryAll(ctx, s.r, dec.Session, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
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
