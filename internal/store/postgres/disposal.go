package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
)

// PurgeSandbox implements store.Store. The record is locked first, so a
// concurrent update of it either commits before (and the purge sees its
// state) or waits and then finds no row.
func (s *Store) PurgeSandbox(ctx context.Context, id string, l store.LedgerEntry) error {
	refs := l.Objects
	if refs == nil {
		refs = []store.ObjectRef{}
	}
	objs, err := json.Marshal(refs)
	if err != nil {
		return fmt.Errorf("purge sandbox %q: %w", id, err)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		var state, org string
		err := tx.QueryRow(ctx, `SELECT state, org_id FROM sandboxes WHERE id = $1 FOR UPDATE`, id).Scan(&state, &org)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("sandbox %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("purge sandbox %q: %w", id, err)
		}
		if sandbox.State(state) != sandbox.StateDeleted {
			return fmt.Errorf("sandbox %q is %s, not deleted: %w", id, state, store.ErrConflict)
		}
		t := now()
		if _, err := tx.Exec(ctx, `INSERT INTO deletion_ledger (org_id, sandbox_id, deleted_reason, deleted_by, purged_at, objects, snapshot_bucket)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, org, id, l.DeletedReason, l.DeletedBy, t, string(objs), l.SnapshotBucket); err != nil {
			return wrap(fmt.Sprintf("purge sandbox %q: ledger", id), err)
		}
		for _, o := range l.Objects {
			if _, err := tx.Exec(ctx, `INSERT INTO object_deletions (bucket, key, kind, queued_at) VALUES ($1, $2, $3, $4)`,
				o.Bucket, o.Key, o.Kind, t); err != nil {
				return wrap(fmt.Sprintf("purge sandbox %q: queue", id), err)
			}
		}
		// Children (deleted ones included) lose only their parent link.
		if _, err := tx.Exec(ctx, `UPDATE sandboxes SET parent_id = '' WHERE parent_id = $1`, id); err != nil {
			return fmt.Errorf("purge sandbox %q: children: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sandboxes WHERE id = $1`, id); err != nil {
			return fmt.Errorf("purge sandbox %q: %w", id, err)
		}
		return nil
	})
}

// Ledger implements store.Store.
func (s *Store) Ledger(ctx context.Context) ([]store.LedgerEntry, error) {
	out, err := queryAll(ctx, s.pool, func(r rowscan.Row) (store.LedgerEntry, error) {
		var l store.LedgerEntry
		var objs string
		if err := r.Scan(&l.ID, &l.OrgID, &l.SandboxID, &l.DeletedReason, &l.DeletedBy, &l.PurgedAt, &objs, &l.SnapshotBucket); err != nil {
			return store.LedgerEntry{}, err
		}
		return l, json.Unmarshal([]byte(objs), &l.Objects)
	}, `SELECT id, org_id, sandbox_id, deleted_reason, deleted_by, purged_at, objects, snapshot_bucket FROM deletion_ledger ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return out, nil
}

// ObjectDeletions implements store.Store.
func (s *Store) ObjectDeletions(ctx context.Context, limit int) ([]store.ObjectDeletion, error) {
	out, err := queryAll(ctx, s.pool, func(r rowscan.Row) (store.ObjectDeletion, error) {
		var d store.ObjectDeletion
		err := r.Scan(&d.ID, &d.Ref.Bucket, &d.Ref.Key, &d.Ref.Kind, &d.QueuedAt, &d.Attempts)
		return d, err
	}, `SELECT id, bucket, key, kind, queued_at, attempts FROM object_deletions ORDER BY id LIMIT $1`, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("object deletions: %w", err)
	}
	return out, nil
}

// FinishObjectDeletion implements store.Store.
func (s *Store) FinishObjectDeletion(ctx context.Context, id int64, failure error) error {
	var err error
	if failure == nil {
		_, err = s.pool.Exec(ctx, `DELETE FROM object_deletions WHERE id = $1`, id)
	} else {
		_, err = s.pool.Exec(ctx, `UPDATE object_deletions SET attempts = attempts + 1, last_error = $1 WHERE id = $2`,
			failure.Error(), id)
	}
	if err != nil {
		return wrap(fmt.Sprintf("finish object deletion %d", id), err)
	}
	return nil
}
