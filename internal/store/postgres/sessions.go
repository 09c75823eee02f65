package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/codec"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
)

const sessionCols = `id, org_id, vault_id, workflow_id, agent_session_id, template, sandbox_id, status, reason,
	warm, version, created_at, updated_at, ready_at, ended_at`

// CreateSession inserts s with Version 1; ErrConflict if its ID exists or
// its context has a live session (the partial unique index decides, so
// two creates racing for one context cannot both win).
func (s *Store) CreateSession(ctx context.Context, ses store.Session) error {
	return insertSession(ctx, s.pool, ses)
}

// execer is what an insert needs from the pool or a transaction.
type execer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func insertSession(ctx context.Context, q execer, ses store.Session) error {
	created := ts(ses.CreatedAt, now())
	var id string
	err := q.QueryRow(ctx, `INSERT INTO sessions (`+sessionCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1, $11, $12, $13, $14) RETURNING id`,
		ses.ID, ses.OrgID, ses.VaultID, ses.WorkflowID, ses.AgentSessionID, ses.Template, ses.SandboxID,
		string(ses.Status), ses.Reason, ses.Warm, created, ts(ses.UpdatedAt, created), optTS(ses.ReadyAt), optTS(ses.EndedAt)).Scan(&id)
	if isUnique(err) {
		return fmt.Errorf("session %q: its context has a live session or the ID exists: %w", ses.ID, store.ErrConflict)
	}
	if err != nil {
		return wrap(fmt.Sprintf("create session %q", ses.ID), err)
	}
	return nil
}

// GetSession returns the session with that ID in orgID (any org if empty).
func (s *Store) GetSession(ctx context.Context, orgID, id string) (store.Session, error) {
	ses, err := getOne(s.pool.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, id), dec.Session, "session", id)
	if err == nil && orgID != "" && ses.OrgID != orgID {
		return store.Session{}, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return ses, err
}

// ContextSession returns the context's live session, else its newest one.
func (s *Store) ContextSession(ctx context.Context, orgID, vaultID, workflowID, agentSessionID string) (store.Session, error) {
	ses, err := dec.Session(s.pool.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions
		WHERE org_id = $1 AND vault_id = $2 AND workflow_id = $3 AND agent_session_id = $4
		ORDER BY status IN ('provisioning', 'ready', 'stopping') DESC, created_at DESC, id DESC LIMIT 1`,
		orgID, vaultID, workflowID, agentSessionID))
	if errors.Is(err, pgx.ErrNoRows) {
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
		WHERE org_id = $1 AND (workflow_id = $2 OR agent_session_id = $2) ORDER BY created_at DESC, id DESC LIMIT 10`,
		orgID, id)
}

// UpdateSession is a compare-and-swap on Version: the UPDATE's WHERE
// re-checks the version on the row it locks.
func (s *Store) UpdateSession(ctx context.Context, ses store.Session) (store.Session, error) {
	out, err := dec.Session(s.pool.QueryRow(ctx, `UPDATE sessions SET status = $1, reason = $2, sandbox_id = $3, ready_at = $4,
			ended_at = $5, version = version + 1, updated_at = $6
		WHERE id = $7 AND version = $8 RETURNING `+sessionCols,
		string(ses.Status), ses.Reason, ses.SandboxID, optTS(ses.ReadyAt), optTS(ses.EndedAt), now(), ses.ID, ses.Version))
	switch {
	case isUnique(err):
		return store.Session{}, fmt.Errorf("session %q: its context has another live session: %w", ses.ID, store.ErrConflict)
	case errors.Is(err, pgx.ErrNoRows):
		cur, err := s.GetSession(ctx, "", ses.ID)
		if err != nil {
			return store.Session{}, err
		}
		return store.Session{}, fmt.Errorf("session %q: version %d, stored %d: %w", ses.ID, ses.Version, cur.Version, store.ErrConflict)
	case err != nil:
		return store.Session{}, wrap(fmt.Sprintf("update session %q", ses.ID), err)
	}
	return out, nil
}

// ListSessions returns the org's sessions, newest first.
func (s *Store) ListSessions(ctx context.Context, orgID string, all bool) ([]store.Session, error) {
	q := `SELECT ` + sessionCols + ` FROM sessions WHERE org_id = $1`
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
	st := make([]string, len(statuses))
	for i, v := range statuses {
		st[i] = string(v)
	}
	return s.querySessions(ctx, `SELECT `+sessionCols+` FROM sessions WHERE status = ANY($1) ORDER BY created_at, id`, st)
}

// ClaimPoolSandbox moves the oldest claimable pooled sandbox to ses's org
// and inserts ses, in one transaction. The pick locks its row FOR UPDATE
// SKIP LOCKED: a concurrent claim skips a sandbox another claim holds and
// takes the next, and a row another claim took meanwhile fails the
// re-check of the WHERE on its new version, so two claims never get the
// same sandbox. A session that cannot be inserted rolls the claim back.
func (s *Store) ClaimPoolSandbox(ctx context.Context, poolOrgID, template, projectID string, ses store.Session) (sandbox.Sandbox, store.Session, error) {
	var sb sandbox.Sandbox
	var out store.Session
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM sandboxes
			WHERE org_id = $1 AND template = $2 AND state = 'running' AND metadata @> $3::jsonb
			ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`,
			poolOrgID, template, `{"`+store.MetaPoolReady+`":"1"}`).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("pool %q: no ready sandbox: %w", template, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("claim from pool %q: %w", template, err)
		}
		meta, err := codec.EncodeMap(map[string]string{store.MetaSessionID: ses.ID})
		if err != nil {
			return err
		}
		if sb, err = dec.Sandbox(tx.QueryRow(ctx, `UPDATE sandboxes SET org_id = $1, project_id = $2, metadata = $3,
				version = version + 1, updated_at = $4
			WHERE id = $5 RETURNING `+sandboxCols, ses.OrgID, projectID, meta, now(), id)); err != nil {
			return wrap(fmt.Sprintf("claim %q", id), err)
		}
		if _, err := tx.Exec(ctx, `UPDATE tokens SET org_id = $1, project_id = $2 WHERE sandbox_id = $3`, ses.OrgID, projectID, id); err != nil {
			return wrap(fmt.Sprintf("claim %q: tokens", id), err)
		}
		ses.SandboxID = id
		if err := insertSession(ctx, tx, ses); err != nil {
			return err
		}
		out, err = dec.Session(tx.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, ses.ID))
		return err
	})
	if err != nil {
		return sandbox.Sandbox{}, store.Session{}, err
	}
	return sb, out, nil
}

// PutPool inserts or replaces a pool setting.
func (s *Store) PutPool(ctx context.Context, p store.Pool) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO pools (template, min_ready, max, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (template) DO UPDATE SET min_ready = excluded.min_ready, max = excluded.max, updated_at = excluded.updated_at`,
		p.Template, p.MinReady, p.Max, ts(p.UpdatedAt, now()))
	if err != nil {
		return wrap(fmt.Sprintf("put pool %q", p.Template), err)
	}
	return nil
}

// ListPools returns every pool setting by template.
func (s *Store) ListPools(ctx context.Context) ([]store.Pool, error) {
	out, err := queryAll(ctx, s.pool, func(r rowscan.Row) (store.Pool, error) {
		var p store.Pool
		err := r.Scan(&p.Template, &p.MinReady, &p.Max, &p.UpdatedAt)
		return p, err
	}, `SELECT template, min_ready, max, updated_at FROM pools ORDER BY template`)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	return out, nil
}

func (s *Store) querySessions(ctx context.Context, q string, args ...any) ([]store.Session, error) {
	out, err := queryAll(ctx, s.pool, dec.Session, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}
