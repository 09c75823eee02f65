package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/checks"
	"github.com/platinum-dev/platinum/internal/store/internal/codec"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
)

// CreateSandbox inserts sb with Version 1; ErrConflict if its ID exists.
func (s *Store) CreateSandbox(ctx context.Context, sb sandbox.Sandbox) error {
	docs, err := codec.EncodeSandbox(sb)
	if err != nil {
		return fmt.Errorf("create sandbox %q: %w", sb.ID, err)
	}
	created := formatTime(sb.CreatedAt, now())
	updated := created
	if !sb.UpdatedAt.IsZero() {
		updated = sandbox.FormatTime(sb.UpdatedAt)
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO sandboxes (`+rowscan.SandboxCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`,
		sb.ID, sb.OrgID, sb.Name, string(sb.State), sb.Template, sb.TemplateVersionID,
		sb.CPU, sb.RAMMB, sb.DiskGB, docs.Env, docs.Meta, sb.HostID, sb.Address, sb.AgentToken, sb.Reason,
		created, updated, deletedAt(sb), docs.Lifecycle, sb.ParentID, sb.ProjectID)
	if err != nil {
		return fmt.Errorf("create sandbox %q: %w", sb.ID, err)
	}
	return conflictUnlessInserted(res, "sandbox", sb.ID)
}

// GetSandbox returns the sandbox with that ID in orgID (any org if orgID is
// empty); ErrNotFound if absent or in another org.
func (s *Store) GetSandbox(ctx context.Context, orgID, id string) (sandbox.Sandbox, error) {
	sb, gen, ok := s.cache.sandbox(ctx, id)
	if !ok {
		var err error
		if sb, err = getSandbox(ctx, s.r, id); err != nil {
			return sandbox.Sandbox{}, err
		}
		s.cache.putSandbox(gen, sb)
	}
	if orgID != "" && sb.OrgID != orgID {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, store.ErrNotFound)
	}
	return sb, nil
}

// queryer is what getSandbox needs from a pool or a transaction.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getSandbox(ctx context.Context, q queryer, id string) (sandbox.Sandbox, error) {
	return getOne(q.QueryRowContext(ctx, `SELECT `+rowscan.SandboxCols+` FROM sandboxes WHERE id = ?`, id), dec.Sandbox, "sandbox", id)
}

// UpdateSandbox writes sb if the stored version equals sb.Version, bumps the
// version and returns the stored record. A state change appends a
// store.EventStateChanged event in the same transaction, so the event log
// never disagrees with the table.
func (s *Store) UpdateSandbox(ctx context.Context, sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	var out sandbox.Sandbox
	err := s.write(ctx, func(tx *sql.Tx) error {
		var orgID, state string
		var version int64
		err := tx.QueryRowContext(ctx, `SELECT org_id, state, version FROM sandboxes WHERE id = ?`, sb.ID).
			Scan(&orgID, &state, &version)
		if err := checks.SandboxUpdate(sb, orgID, version, err, sql.ErrNoRows); err != nil {
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

// ModifySandbox implements store.Store. The write transaction (BEGIN
// IMMEDIATE on the one write connection) is the row lock: no other writer
// runs between the read and the write.
func (s *Store) ModifySandbox(ctx context.Context, orgID, id string, fn func(*sandbox.Sandbox) error) (sandbox.Sandbox, error) {
	var out sandbox.Sandbox
	err := s.write(ctx, func(tx *sql.Tx) error {
		cur, err := getSandbox(ctx, tx, id)
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

// writeSandbox writes sb over the row whose stored org and state are orgID
// and from (its version already checked), appends the state change event
// if the state changed, and returns the stored record.
func writeSandbox(ctx context.Context, tx *sql.Tx, sb sandbox.Sandbox, orgID string, from sandbox.State) (sandbox.Sandbox, error) {
	docs, err := codec.EncodeSandbox(sb)
	if err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("update sandbox %q: %w", sb.ID, err)
	}
	t := sandbox.FormatTime(now())
	if _, err := tx.ExecContext(ctx, `UPDATE sandboxes SET
			name = ?, state = ?, template = ?, template_version_id = ?, cpu = ?, ram_mb = ?,
			disk_gb = ?, env = ?, metadata = ?, host_id = ?, address = ?, agent_token = ?,
			reason = ?, version = version + 1, updated_at = ?, deleted_at = ?, lifecycle = ?
		WHERE id = ? AND version = ?`,
		sb.Name, string(sb.State), sb.Template, sb.TemplateVersionID, sb.CPU, sb.RAMMB,
		sb.DiskGB, docs.Env, docs.Meta, sb.HostID, sb.Address, sb.AgentToken,
		sb.Reason, t, deletedAt(sb), docs.Lifecycle,
		sb.ID, sb.Version); err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: name %q is taken by a live sandbox: %w", sb.ID, sb.Name, store.ErrConflict)
		}
		return sandbox.Sandbox{}, fmt.Errorf("update sandbox %q: %w", sb.ID, err)
	}

	if from != sb.State {
		data, err := json.Marshal(store.StateChange{From: from, To: sb.State, Reason: sb.Reason})
		if err != nil {
			return sandbox.Sandbox{}, fmt.Errorf("update sandbox %q: event: %w", sb.ID, err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO events (org_id, sandbox_id, type, data, created_at) VALUES (?, ?, ?, ?, ?)`,
			orgID, sb.ID, store.EventStateChanged, string(data), t); err != nil {
			return sandbox.Sandbox{}, fmt.Errorf("update sandbox %q: event: %w", sb.ID, err)
		}
	}
	return getSandbox(ctx, tx, sb.ID)
}

// ListSandboxes returns one page and the total count, both from one read
// snapshot so the total always matches the pages a client walks.
func (s *Store) ListSandboxes(ctx context.Context, o store.ListOptions) ([]sandbox.Sandbox, int, error) {
	var where []string
	var args []any
	if o.OrgID != "" {
		where = append(where, "org_id = ?")
		args = append(args, o.OrgID)
	}
	switch {
	case o.State != "":
		where = append(where, "state = ?")
		args = append(args, string(o.State))
	case !o.IncludeDeleted:
		where = append(where, "state <> ?")
		args = append(args, string(sandbox.StateDeleted))
	}
	if o.State == "" {
		for _, st := range o.ExcludeStates {
			where = append(where, "state <> ?")
			args = append(args, string(st))
		}
	}
	switch {
	case o.ParentID != "":
		where = append(where, "parent_id = ?")
		args = append(args, o.ParentID)
	case o.RootsOnly:
		where = append(where, "parent_id = ''")
	}
	if o.ProjectID != "" {
		where = append(where, "project_id = ?")
		args = append(args, o.ProjectID)
	}
	if o.HostID != "" {
		where = append(where, "host_id = ?")
		args = append(args, o.HostID)
	}
	for k, v := range o.Metadata {
		where = append(where, "json_extract(metadata, '$.' || json_quote(?)) = ?")
		args = append(args, k, v)
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	limit := o.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	offset := max(o.Offset, 0)

	var total int
	rows := []sandbox.Sandbox{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes`+cond, args...).Scan(&total); err != nil {
			return err
		}
		var err error
		rows, err = querySandboxes(ctx, tx,
			`SELECT `+rowscan.SandboxCols+` FROM sandboxes`+cond+` ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
			append(args, limit, offset)...)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list sandboxes: %w", err)
	}
	return rows, total, nil
}

func querySandboxes(ctx context.Context, q rowsQueryer, query string, args ...any) ([]sandbox.Sandbox, error) {
	return queryAll(ctx, q, dec.Sandbox, query, args...)
}

// deletedAt is sb.DeletedAt as a nullable stored time.
func deletedAt(sb sandbox.Sandbox) any {
	if sb.DeletedAt == nil {
		return nil
	}
	return sandbox.FormatTime(*sb.DeletedAt)
}

// AddEvent appends one event row.
func (s *Store) AddEvent(ctx context.Context, orgID, sandboxID, typ string, data any) error {
	b, err := codec.EventData(data)
	if err != nil {
		return fmt.Errorf("add event: %w", err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO events (org_id, sandbox_id, type, data, created_at) VALUES (?, ?, ?, ?, ?)`,
		orgID, sandboxID, typ, b, sandbox.FormatTime(now())); err != nil {
		return fmt.Errorf("add event: %w", err)
	}
	return nil
}

// SandboxTotals implements store.Store.
func (s *Store) SandboxTotals(ctx context.Context) ([]store.StateTotal, error) {
	out, err := queryAll(ctx, s.r, func(sc scanner) (store.StateTotal, error) {
		var t store.StateTotal
		var state string
		err := sc.Scan(&state, &t.Count, &t.CPU, &t.RAMMB, &t.DiskGB)
		t.State = sandbox.State(state)
		return t, err
	}, `SELECT state, COUNT(*), COALESCE(SUM(cpu), 0), COALESCE(SUM(ram_mb), 0), COALESCE(SUM(disk_gb), 0) FROM sandboxes GROUP BY state ORDER BY state`)
	if err != nil {
		return nil, fmt.Errorf("sandbox totals: %w", err)
	}
	return out, nil
}

// AdoptSandbox implements store.Store.
func (s *Store) AdoptSandbox(ctx context.Context, fromOrgID string, sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	var out sandbox.Sandbox
	err := s.write(ctx, func(tx *sql.Tx) error {
		cur, err := getSandbox(ctx, tx, sb.ID)
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
		t := sandbox.FormatTime(now())
		if _, err := tx.ExecContext(ctx, `UPDATE sandboxes SET org_id = ?, project_id = ?, parent_id = ?, name = ?,
				env = ?, metadata = ?, lifecycle = ?, created_at = ?, updated_at = ?, version = version + 1
			WHERE id = ?`,
			sb.OrgID, sb.ProjectID, sb.ParentID, sb.Name, docs.Env, docs.Meta, docs.Lifecycle,
			formatTime(sb.CreatedAt, now()), t, sb.ID); err != nil {
			if strings.Contains(err.Error(), "UNIQUE constraint failed") {
				return fmt.Errorf("sandbox %q: name %q is taken by a live sandbox: %w", sb.ID, sb.Name, store.ErrConflict)
			}
			return fmt.Errorf("adopt sandbox %q: %w", sb.ID, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tokens SET org_id = ?, project_id = ? WHERE sandbox_id = ?`, sb.OrgID, sb.ProjectID, sb.ID); err != nil {
			return fmt.Errorf("adopt sandbox %q: tokens: %w", sb.ID, err)
		}
		data, err := json.Marshal(store.StateChange{From: sandbox.StateCreating, To: sb.State})
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO events (org_id, sandbox_id, type, data, created_at) VALUES (?, ?, ?, ?, ?)`,
			sb.OrgID, sb.ID, store.EventStateChanged, string(data), t); err != nil {
			return fmt.Errorf("adopt sandbox %q: event: %w", sb.ID, err)
		}
		out, err = getSandbox(ctx, tx, sb.ID)
		return err
	})
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	return out, nil
}
