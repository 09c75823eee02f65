package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/checks"
	"github.com/platinum-dev/platinum/internal/store/internal/codec"
)

// PurgeSandbox implements store.Store.
func (s *Store) PurgeSandbox(ctx context.Context, id string, l store.LedgerEntry) error {
	objs, err := codec.EncodeObjects(l.Objects)
	if err != nil {
		return fmt.Errorf("purge sandbox %q: %w", id, err)
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		var state, org string
		err := tx.QueryRowContext(ctx, `SELECT state, org_id FROM sandboxes WHERE id = ?`, id).Scan(&state, &org)
		if err := checks.SandboxPurge(id, state, err, sql.ErrNoRows); err != nil {
			return err
		}
		t := sandbox.FormatTime(now())
		if _, err := tx.ExecContext(ctx, `INSERT INTO deletion_ledger
			(org_id, sandbox_id, deleted_reason, deleted_by, purged_at, objects, snapshot_bucket) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			org, id, l.DeletedReason, l.DeletedBy, t, objs, l.SnapshotBucket); err != nil {
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
