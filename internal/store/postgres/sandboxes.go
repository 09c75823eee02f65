package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/checks"
	"github.com/platinum-dev/platinum/internal/store/internal/codec"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// CreateSandbox inserts sb with Version 1; ErrConflict if its ID exists.
func (s *Store) CreateSandbox(ctx context.Context, sb sandbox.Sandbox) error {
	docs, err := codec.EncodeSandbox(sb)
	if err != nil {
		return fmt.Errorf("create sandbox %q: %w", sb.ID, err)
	}
	created := ts(sb.CreatedAt, now())
	updated := ts(sb.UpdatedAt, created)
	tag, err := s.pool.Exec(ctx, `INSERT INTO sandboxes (`+rowscan.SandboxCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 1, $16, $17, $18, $19, $20, $21)
		ON CONFLICT DO NOTHING`,
		sb.ID, sb.OrgID, sb.Name, string(sb.State), sb.Template, sb.TemplateVersionID,
		sb.CPU, sb.RAMMB, sb.DiskGB, docs.Env, docs.Meta, sb.HostID, sb.Address, sb.AgentToken, sb.Reason,
		created, updated, optTS(sb.DeletedAt), docs.Lifecycle, sb.ParentID, sb.ProjectID)
	if err != nil {
		return wrap(fmt.Sprintf("create sandbox %q", sb.ID), err)
	}
	return conflictUnlessInserted(tag, "sandbox", sb.ID)
}

// GetSandbox returns the sandbox with that ID in orgID (any org if orgID is
// empty); ErrNotFound if absent or in another org.
func (s *Store) GetSandbox(ctx context.Context, orgID, id string) (sandbox.Sandbox, error) {
	sb, err := getOne(s.pool.QueryRow(ctx, `SELECT `+rowscan.SandboxCols+` FROM sandboxes WHERE id = $1`, id), dec.Sandbox, "sandbox", id)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if orgID != "" && sb.OrgID != orgID {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, store.ErrNotFound)
	}
	return sb, nil
}

// UpdateSandbox writes sb if the stored version equals sb.Version. The
// version is read under the row lock (FOR UPDATE), so the check and the
// write are one step for every other writer of the row.
func (s *Store) UpdateSandbox(ctx context.Context, sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	var out sandbox.Sandbox
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var orgID, state string
		var version int64
		err := tx.QueryRow(ctx, `SELECT org_id, state, version FROM sandboxes WHERE id = $1 FOR UPDATE`, sb.ID).
			Scan(&orgID, &state, &version)
		if err := checks.SandboxUpdate(sb, orgID, version, err, pgx.ErrNoRows); err != nil {
			return err
		}
		out, err = writeSandbox(ctx, tx, sb, orgID, sandbox.State(state))
		return err
	})
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	return out, nil
}

// ModifySandbox implements store.Store: SELECT … FOR UPDATE, fn, write, in
// one transaction; a concurrent caller waits on the row lock and then
// reads the committed result.
func (s *Store) ModifySandbox(ctx context.Context, orgID, id string, fn func(*sandbox.Sandbox) error) (sandbox.Sandbox, error) {
	var out sandbox.Sandbox
	err := s.tx(ctx, func(tx pgx.Tx) error {
		cur, err := getOne(tx.QueryRow(ctx, `SELECT `+rowscan.SandboxCols+` FROM sandboxes WHERE id = $1 FOR UPDATE`, id),
			dec.Sandbox, "sandbox", id)
		if err != nil {
			return err
		}
		sb, err := checks.SandboxModify(cur, orgID, fn)
		if err != nil {
			return err
		}
		out, err = writeSandbox(ctx, tx, sb, cur.OrgID, cur.State)
		return err
	})
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	return out, nil
}

// writeSandbox writes sb over its row, locked by the caller with the
// stored org and state orgID and from, and appends the state change event
// last (it takes the events lock, held to commit).
func writeSandbox(ctx context.Context, tx pgx.Tx, sb sandbox.Sandbox, orgID string, from sandbox.State) (sandbox.Sandbox, error) {
	docs, err := codec.EncodeSandbox(sb)
	if err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("update sandbox %q: %w", sb.ID, err)
	}
	t := now()
	out, err := dec.Sandbox(tx.QueryRow(ctx, `UPDATE sandboxes SET
			name = $1, state = $2, template = $3, template_version_id = $4, cpu = $5, ram_mb = $6,
			disk_gb = $7, env = $8, metadata = $9, host_id = $10, address = $11, agent_token = $12,
			reason = $13, version = version + 1, updated_at = $14, deleted_at = $15, lifecycle = $16
		WHERE id = $17 RETURNING `+rowscan.SandboxCols,
		sb.Name, string(sb.State), sb.Template, sb.TemplateVersionID, sb.CPU, sb.RAMMB,
		sb.DiskGB, docs.Env, docs.Meta, sb.HostID, sb.Address, sb.AgentToken,
		sb.Reason, t, optTS(sb.DeletedAt), docs.Lifecycle, sb.ID))
	if isUnique(err) {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: name %q is taken by a live sandbox: %w", sb.ID, sb.Name, store.ErrConflict)
	}
	if err != nil {
		return sandbox.Sandbox{}, wrap(fmt.Sprintf("update sandbox %q", sb.ID), err)
	}
	if from != sb.State {
		data, err := json.Marshal(store.StateChange{From: from, To: sb.State, Reason: sb.Reason})
		if err != nil {
			return sandbox.Sandbox{}, fmt.Errorf("update sandbox %q: event: %w", sb.ID, err)
		}
		if err := insertEvent(ctx, tx, orgID, sb.ID, store.EventStateChanged, string(data), t); err != nil {
			return sandbox.Sandbox{}, fmt.Errorf("update sandbox %q: %w", sb.ID, err)
		}
	}
	return out, nil
}

// ListSandboxes returns one page and the total count, both read in one
// REPEATABLE READ snapshot: under READ COMMITTED each statement would see
// its own, and a create between them would make the total disagree with
// the pages a client walks.
func (s *Store) ListSandboxes(ctx context.Context, o store.ListOptions) ([]sandbox.Sandbox, int, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if o.OrgID != "" {
		where = append(where, "org_id = "+arg(o.OrgID))
	}
	switch {
	case o.State != "":
		where = append(where, "state = "+arg(string(o.State)))
	case !o.IncludeDeleted:
		where = append(where, "state <> "+arg(string(sandbox.StateDeleted)))
	}
	if o.State == "" && len(o.ExcludeStates) > 0 {
		where = append(where, "state <> ALL("+arg(sqldb.Strings(o.ExcludeStates))+")")
	}
	switch {
	case o.ParentID != "":
		where = append(where, "parent_id = "+arg(o.ParentID))
	case o.RootsOnly:
		where = append(where, "parent_id = ''")
	}
	if o.ProjectID != "" {
		where = append(where, "project_id = "+arg(o.ProjectID))
	}
	if o.HostID != "" {
		where = append(where, "host_id = "+arg(o.HostID))
	}
	if len(o.Metadata) > 0 {
		md, err := codec.EncodeMap(o.Metadata)
		if err != nil {
			return nil, 0, fmt.Errorf("list sandboxes: %w", err)
		}
		where = append(where, "metadata @> "+arg(md)+"::jsonb")
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	var limit any // nil: LIMIT NULL, no limit
	if o.Limit > 0 {
		limit = o.Limit
	}
	page := `SELECT ` + rowscan.SandboxCols + ` FROM sandboxes` + cond + ` ORDER BY created_at DESC, id DESC LIMIT ` +
		arg(limit) + ` OFFSET ` + arg(max(o.Offset, 0))

	var total int
	var rows []sandbox.Sandbox
	err := s.snapshot(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sandboxes`+cond, args[:len(args)-2]...).Scan(&total); err != nil {
			return err
		}
		if s.afterListCount != nil {
			s.afterListCount()
		}
		var err error
		rows, err = queryAll(ctx, tx, dec.Sandbox, page, args...)
		return err
	})
	if err != nil {
		return nil, 0, wrap("list sandboxes", err)
	}
	return rows, total, nil
}

// SandboxTotals implements store.Store.
func (s *Store) SandboxTotals(ctx context.Context) ([]store.StateTotal, error) {
	out, err := queryAll(ctx, s.pool, func(r rowscan.Row) (store.StateTotal, error) {
		var t store.StateTotal
		var state string
		err := r.Scan(&state, &t.Count, &t.CPU, &t.RAMMB, &t.DiskGB)
		t.State = sandbox.State(state)
		return t, err
	}, `SELECT state, count(*), coalesce(sum(cpu), 0), coalesce(sum(ram_mb), 0)::bigint, coalesce(sum(disk_gb), 0)::bigint
		FROM sandboxes GROUP BY state ORDER BY state`)
	if err != nil {
		return nil, fmt.Errorf("sandbox totals: %w", err)
	}
	return out, nil
}

// AdoptSandbox implements store.Store (the row locked FOR UPDATE).
func (s *Store) AdoptSandbox(ctx context.Context, fromOrgID string, sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	var out sandbox.Sandbox
	err := s.tx(ctx, func(tx pgx.Tx) error {
		cur, err := getOne(tx.QueryRow(ctx, `SELECT `+rowscan.SandboxCols+` FROM sandboxes WHERE id = $1 FOR UPDATE`, sb.ID),
			dec.Sandbox, "sandbox", sb.ID)
		if err != nil {
			return err
		}
		if sb, err = checks.SandboxAdopt(cur, fromOrgID, sb); err != nil {
			return err
		}
		docs, err := codec.EncodeSandbox(sb)
		if err != nil {
			return fmt.Errorf("adopt sandbox %q: %w", sb.ID, err)
		}
		t := now()
		out, err = dec.Sandbox(tx.QueryRow(ctx, `UPDATE sandboxes SET org_id = $1, project_id = $2, parent_id = $3, name = $4,
				env = $5, metadata = $6, lifecycle = $7, created_at = $8, updated_at = $9, version = version + 1
			WHERE id = $10 RETURNING `+rowscan.SandboxCols,
			sb.OrgID, sb.ProjectID, sb.ParentID, sb.Name, docs.Env, docs.Meta, docs.Lifecycle,
			ts(sb.CreatedAt, t), t, sb.ID))
		if isUnique(err) {
			return fmt.Errorf("sandbox %q: name %q is taken by a live sandbox: %w", sb.ID, sb.Name, store.ErrConflict)
		}
		if err != nil {
			return wrap(fmt.Sprintf("adopt sandbox %q", sb.ID), err)
		}
		if _, err := tx.Exec(ctx, `UPDATE tokens SET org_id = $1, project_id = $2 WHERE sandbox_id = $3`, sb.OrgID, sb.ProjectID, sb.ID); err != nil {
			return wrap(fmt.Sprintf("adopt sandbox %q: tokens", sb.ID), err)
		}
		data, err := json.Marshal(store.StateChange{From: sandbox.StateCreating, To: out.State})
		if err != nil {
			return err
		}
		return insertEvent(ctx, tx, sb.OrgID, sb.ID, store.EventStateChanged, string(data), t)
	})
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	return out, nil
}
