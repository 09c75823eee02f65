// This file is the part of the session store that is the same
// in both SQL stores: reading sessions and pool settings, and writing the
// latter. Each store keeps its writes of sessions (CreateSession,
// UpdateSession, ClaimPoolSandbox), whose conflict detection and locking
// differ.

package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// SessionCols are the sessions columns rowscan.Decoder.Session reads.
const SessionCols = `id, org_id, vault_id, workflow_id, agent_session_id, template, sandbox_id, status, reason,
	warm, version, created_at, updated_at, ready_at, ended_at`

// GetSession returns the session with that ID in orgID (any org if empty).
func (s *Store) GetSession(ctx context.Context, orgID, id string) (store.Session, error) {
	ses, err := sqldb.One(ctx, s.db, s.db.Decoder().Session, "session", id, `SELECT `+SessionCols+` FROM sessions WHERE id = ?`, id)
	if err == nil && orgID != "" && ses.OrgID != orgID {
		return store.Session{}, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return ses, err
}

// ContextSession returns the context's live session, else its newest one.
func (s *Store) ContextSession(ctx context.Context, orgID, vaultID, workflowID, agentSessionID string) (store.Session, error) {
	ses, err := s.db.Decoder().Session(s.db.QueryRow(ctx, `SELECT `+SessionCols+` FROM sessions
		WHERE org_id = ? AND vault_id = ? AND workflow_id = ? AND agent_session_id = ?
		ORDER BY status IN ('provisioning', 'ready', 'stopping') DESC, created_at DESC, id DESC LIMIT 1`,
		orgID, vaultID, workflowID, agentSessionID))
	if errors.Is(err, s.db.NoRows()) {
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
	return s.querySessions(ctx, `SELECT `+SessionCols+` FROM sessions
		WHERE org_id = ? AND (workflow_id = ? OR agent_session_id = ?) ORDER BY created_at DESC, id DESC LIMIT 10`,
		orgID, id, id)
}

// ListSessions returns the org's sessions, newest first.
func (s *Store) ListSessions(ctx context.Context, orgID string, all bool) ([]store.Session, error) {
	q := `SELECT ` + SessionCols + ` FROM sessions WHERE org_id = ?`
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
	cond, args := s.db.AnyOf("status", sqldb.Strings(statuses))
	return s.querySessions(ctx, `SELECT `+SessionCols+` FROM sessions WHERE `+cond+` ORDER BY created_at, id`, args...)
}

func (s *Store) querySessions(ctx context.Context, q string, args ...any) ([]store.Session, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().Session, "list sessions", q, args...)
}

// PutPool inserts or replaces a pool setting.
func (s *Store) PutPool(ctx context.Context, p store.Pool) error {
	_, err := s.db.Exec(ctx, `INSERT INTO pools (template, runtime, min_ready, max, auto, updated_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (template, runtime) DO UPDATE SET min_ready = excluded.min_ready, max = excluded.max, auto = excluded.auto, updated_at = excluded.updated_at`,
		p.Template, p.Runtime, p.MinReady, p.Max, p.Auto, s.db.Time(sqldb.Or(p.UpdatedAt, sqldb.Now())))
	if err != nil {
		return s.db.Err(fmt.Sprintf("put pool %q", store.PoolKey(p.Template, p.Runtime)), err)
	}
	return nil
}

// ListPools returns every pool setting by template, then runtime class.
func (s *Store) ListPools(ctx context.Context) ([]store.Pool, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().Pool, "list pools", `SELECT template, runtime, min_ready, max, auto, updated_at FROM pools ORDER BY template, runtime`)
}
