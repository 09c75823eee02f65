// This file is store.SnapshotStore for both SQL stores: the
// snapshots table, its queries and checks are the same in SQLite and
// PostgreSQL but for what the store's sqldb.DB supplies (placeholders,
// the stored form of times, driver errors), so they are written once.

package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

const snapshotCols = `id, org_id, sandbox_id, name, kind, state, memory, size_bytes, source, host_id,
	disk_image, memory_image, bucket, manifest_key, reason, created_at, updated_at`

// CreateSnapshot implements store.SnapshotStore.
func (s *Store) CreateSnapshot(ctx context.Context, sn sandbox.Snapshot) error {
	src, err := json.Marshal(sn.Source)
	if err != nil {
		return fmt.Errorf("create snapshot %q: %w", sn.ID, err)
	}
	created := sqldb.Or(sn.CreatedAt, sqldb.Now())
	n, err := s.db.Exec(ctx, `INSERT INTO snapshots (`+snapshotCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		sn.ID, sn.OrgID, sn.SandboxID, sn.Name, string(sn.Kind), string(sn.State), sn.Memory, sn.SizeBytes, string(src),
		sn.HostID, sn.DiskImage, sn.MemoryImage, sn.Bucket, sn.ManifestKey, sn.Reason,
		s.db.Time(created), s.db.Time(sqldb.Or(sn.UpdatedAt, created)))
	if err != nil {
		return s.db.Err(fmt.Sprintf("create snapshot %q", sn.ID), err)
	}
	return sqldb.Inserted(n, "snapshot", sn.ID)
}

// GetSnapshot implements store.SnapshotStore.
func (s *Store) GetSnapshot(ctx context.Context, orgID, id string) (sandbox.Snapshot, error) {
	sn, err := sqldb.One(ctx, s.db, s.db.Decoder().Snapshot, "snapshot", id, `SELECT `+snapshotCols+` FROM snapshots WHERE id = ?`, id)
	if err == nil && orgID != "" && sn.OrgID != orgID {
		return sandbox.Snapshot{}, fmt.Errorf("snapshot %q: %w", id, store.ErrNotFound)
	}
	return sn, err
}

// UpdateSnapshot implements store.SnapshotStore: one statement that
// returns the row it wrote.
func (s *Store) UpdateSnapshot(ctx context.Context, sn sandbox.Snapshot) (sandbox.Snapshot, error) {
	src, err := json.Marshal(sn.Source)
	if err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("update snapshot %q: %w", sn.ID, err)
	}
	out, err := s.db.Decoder().Snapshot(s.db.WriteRow(ctx, `UPDATE snapshots SET name = ?, kind = ?, state = ?, memory = ?,
		size_bytes = ?, source = ?, host_id = ?, disk_image = ?, memory_image = ?, bucket = ?, manifest_key = ?, reason = ?,
		updated_at = ? WHERE id = ? RETURNING `+snapshotCols,
		sn.Name, string(sn.Kind), string(sn.State), sn.Memory, sn.SizeBytes, string(src), sn.HostID, sn.DiskImage,
		sn.MemoryImage, sn.Bucket, sn.ManifestKey, sn.Reason, s.db.Time(sqldb.Now()), sn.ID))
	if errors.Is(err, s.db.NoRows()) {
		return sandbox.Snapshot{}, fmt.Errorf("snapshot %q: %w", sn.ID, store.ErrNotFound)
	}
	if err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("update snapshot %q: %w", sn.ID, err)
	}
	return out, nil
}

// ListSnapshots implements store.SnapshotStore.
func (s *Store) ListSnapshots(ctx context.Context, f store.SnapshotFilter) ([]sandbox.Snapshot, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, v string }{
		{"org_id", f.OrgID}, {"sandbox_id", f.SandboxID}, {"kind", string(f.Kind)}, {"state", string(f.State)},
	} {
		if c.v != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.v)
		}
	}
	q := `SELECT ` + snapshotCols + ` FROM snapshots`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	return sqldb.List(ctx, s.db, s.db.Decoder().Snapshot, "list snapshots", q+` ORDER BY created_at DESC, id DESC`, args...)
}

// DeleteSnapshot implements store.SnapshotStore. It is idempotent.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	return sqldb.Write(ctx, s.db, fmt.Sprintf("delete snapshot %q", id),
		`DELETE FROM snapshots WHERE id = ?`, id)
}
