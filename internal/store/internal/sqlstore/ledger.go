// This file is the part of the disposal store that is the same in
// both SQL stores: reading the deletion ledger and the object deletion
// queue, and finishing a queued deletion. Each store keeps PurgeSandbox,
// whose locking differs.

package sqlstore

import (
	"context"
	"fmt"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// Ledger implements store.Store.
func (s *Store) Ledger(ctx context.Context) ([]store.LedgerEntry, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().LedgerEntry, "ledger", `SELECT id, org_id, sandbox_id, deleted_reason, deleted_by,
		purged_at, objects, snapshot_bucket FROM deletion_ledger ORDER BY id`)
}

// ObjectDeletions implements store.Store.
func (s *Store) ObjectDeletions(ctx context.Context, limit int) ([]store.ObjectDeletion, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().ObjectDeletion, "object deletions",
		`SELECT id, bucket, key, kind, queued_at, attempts FROM object_deletions ORDER BY id LIMIT ?`, s.db.Limit(limit))
}

// FinishObjectDeletion implements store.Store: done, it leaves the queue;
// failed, it counts the attempt and keeps the error.
func (s *Store) FinishObjectDeletion(ctx context.Context, id int64, failure error) error {
	var err error
	if failure == nil {
		_, err = s.db.Exec(ctx, `DELETE FROM object_deletions WHERE id = ?`, id)
	} else {
		_, err = s.db.Exec(ctx, `UPDATE object_deletions SET attempts = attempts + 1, last_error = ? WHERE id = ?`,
			failure.Error(), id)
	}
	if err != nil {
		return s.db.Err(fmt.Sprintf("finish object deletion %d", id), err)
	}
	return nil
}
