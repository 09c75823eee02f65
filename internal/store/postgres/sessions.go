package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/checks"
	"github.com/platinum-dev/platinum/internal/store/internal/codec"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
	"github.com/platinum-dev/platinum/internal/store/internal/sqlstore"
)

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
	err := q.QueryRow(ctx, `INSERT INTO sessions (`+sqlstore.SessionCols+`)
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

// UpdateSession is a compare-and-swap on Version: the UPDATE's WHERE
// re-checks the version on the row it locks.
func (s *Store) UpdateSession(ctx context.Context, ses store.Session) (store.Session, error) {
	out, err := dec.Session(s.pool.QueryRow(ctx, `UPDATE sessions SET status = $1, reason = $2, sandbox_id = $3, ready_at = $4,
			ended_at = $5, version = version + 1, updated_at = $6
		WHERE id = $7 AND version = $8 RETURNING `+sqlstore.SessionCols,
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

// ClaimPoolSandbox moves the oldest claimable pooled sandbox to ses's org,
// inserts ses and records the claim as the pool's demand, in one
// transaction. The pick locks its row FOR UPDATE
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
			poolOrgID, template, poolMatch(template)).Scan(&id)
		if err := checks.PoolClaim(template, err, pgx.ErrNoRows); err != nil {
			return err
		}
		meta, err := codec.EncodeMap(map[string]string{store.MetaSessionID: ses.ID})
		if err != nil {
			return err
		}
		if sb, err = dec.Sandbox(tx.QueryRow(ctx, `UPDATE sandboxes SET org_id = $1, project_id = $2, metadata = $3,
				version = version + 1, updated_at = $4
			WHERE id = $5 RETURNING `+rowscan.SandboxCols, ses.OrgID, projectID, meta, now(), id)); err != nil {
			return wrap(fmt.Sprintf("claim %q", id), err)
		}
		if _, err := tx.Exec(ctx, `UPDATE tokens SET org_id = $1, project_id = $2 WHERE sandbox_id = $3`, ses.OrgID, projectID, id); err != nil {
			return wrap(fmt.Sprintf("claim %q: tokens", id), err)
		}
		ses.SandboxID = id
		if err := insertSession(ctx, tx, ses); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqldb.Rebind(sqlstore.PoolClaimInsert), ses.ID, template, "", ts(ses.CreatedAt, now()), true, true); err != nil {
			return wrap(fmt.Sprintf("claim %q: pool demand", id), err)
		}
		out, err = dec.Session(tx.QueryRow(ctx, `SELECT `+sqlstore.SessionCols+` FROM sessions WHERE id = $1`, ses.ID))
		return err
	})
	if err != nil {
		return sandbox.Sandbox{}, store.Session{}, err
	}
	return sb, out, nil
}

// poolMatch is the metadata a claimable member of template's default-class
// pool holds (store.PoolKey), as a jsonb containment argument.
func poolMatch(template string) string {
	m, _ := json.Marshal(map[string]string{store.MetaPoolReady: "1", store.MetaPool: store.PoolKey(template, "")})
	return string(m)
}
