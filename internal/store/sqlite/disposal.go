package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// PurgeSandbox implements store.Store.
func (s *Store) PurgeSandbox(ctx context.Context, id string, l store.LedgerEntry) error {
	objs, err := json.Marshal(nonNilRefs(l.Objects))
	if err != nil {
		return fmt.Errorf("purge sandbox %q: %w", id, err)
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		var state, org string
		err := tx.QueryRowContext(ctx, `SELECT state, org_id FROM sandboxes WHERE id = ?`, id).Scan(&state, &org)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sandbox %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("purge sandbox %q: %w", id, err)
		}
		if sandbox.State(state) != sandbox.StateDeleted {
			return fmt.Errorf("sandbox %q is %s, not deleted: %w", id, state, store.ErrConflict)
		}
		t := sandbox.FormatTime(now())
		if _, err := tx.ExecContext(ctx, `INSERT INTO deletion_ledger
			(org_id, sandbox_id, deleted_reason, deleted_by, purged_at, objects, snapshot_bucket) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			org, id, l.DeletedReason, l.DeletedBy, t, string(objs), l.SnapshotBucket); err != nil {
			return fmt.Errorf("purge sandbox %q: ledger: %w", id, err)
		}
		for _, o := range l.Objects {
			if _, err := tx.ExecContext(ctx, `INSERT INTO object_deletions (bucket, key, kind, queued_at) VALUES (?, ?, ?, ?)`,
				o.Bucket, o.Key, o.Kind, t); err != nil {
				return fmt.Errorf("purge sandbox %q: queue: %w", id, err)
			}
		}
		// Children (deleted ones included) lose only their parent link.
		if _, err := tx.ExecContext(ctx, `UPDATE sandboxes SET parent_id = '' WHERE parent_id = ?`, id); err != nil {
			return fmt.Errorf("purge sandbox %q: children: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id); err != nil {
			return fmt.Errorf("purge sandbox %q: %w", id, err)
		}
		return nil
	})
}

func nonNilRefs(r []store.ObjectRef) []store.ObjectRef {
	if r == nil {
		return []store.ObjectRef{}
	}
	return r
}

// Ledger implements store.Store.
func (s *Store) Ledger(ctx context.Context) ([]store.LedgerEntry, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, org_id, sandbox_id, deleted_reason, deleted_by, purged_at, objects, snapshot_bucket
		FROM deletion_ledger ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	defer rows.Close()
	out := []store.LedgerEntry{}
	for rows.Next() {
		var l store.LedgerEntry
		var purged, objs string
		if err := rows.Scan(&l.ID, &l.OrgID, &l.SandboxID, &l.DeletedReason, &l.DeletedBy, &purged, &objs, &l.SnapshotBucket); err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		if l.PurgedAt, err = parseTime(purged); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(objs), &l.Objects); err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// ObjectDeletions implements store.Store.
func (s *Store) ObjectDeletions(ctx context.Context, limit int) ([]store.ObjectDeletion, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, bucket, key, kind, queued_at, attempts FROM object_deletions ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("object deletions: %w", err)
	}
	defer rows.Close()
	out := []store.ObjectDeletion{}
	for rows.Next() {
		var d store.ObjectDeletion
		var queued string
		if err := rows.Scan(&d.ID, &d.Ref.Bucket, &d.Ref.Key, &d.Ref.Kind, &queued, &d.Attempts); err != nil {
			return nil, fmt.Errorf("object deletions: %w", err)
		}
		if d.QueuedAt, err = parseTime(queued); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// FinishObjectDeletion implements store.Store.
func (s *Store) FinishObjectDeletion(ctx context.Context, id int64, failure error) error {
	var err error
	if failure == nil {
		_, err = s.w.ExecContext(ctx, `DELETE FROM object_deletions WHERE id = ?`, id)
	} else {
		_, err = s.w.ExecContext(ctx, `UPDATE object_deletions SET attempts = attempts + 1, last_error = ? WHERE id = ?`, failure.Error(), id)
	}
	if err != nil {
		return fmt.Errorf("finish object deletion %d: %w", id, err)
	}
	return nil
}
