package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/checks"
	"github.com/platinum-dev/platinum/internal/store/internal/codec"
)

// PurgeSandbox implements store.Store. The record is locked first, so a
// concurrent update of it either commits before (and the purge sees its
// state) or waits and then finds no row.
func (s *Store) PurgeSandbox(ctx context.Context, id string, l store.LedgerEntry) error {
	objs, err := codec.EncodeObjects(l.Objects)
	if err != nil {
		return fmt.Errorf("purge sandbox %q: %w", id, err)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		var state, org string
		err := tx.QueryRow(ctx, `SELECT state, org_id FROM sandboxes WHERE id = $1 FOR UPDATE`, id).Scan(&state, &org)
		if err := checks.SandboxPurge(id, state, err, pgx.ErrNoRows); err != nil {
			return err
		}
		t := now()
		if _, err := tx.Exec(ctx, `INSERT INTO deletion_ledger (org_id, sandbox_id, deleted_reason, deleted_by, purged_at, objects, snapshot_bucket)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, org, id, l.DeletedReason, l.DeletedBy, t, objs, l.SnapshotBucket); err != nil {
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
