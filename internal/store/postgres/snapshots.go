package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

const snapshotCols = `id, org_id, sandbox_id, name, kind, state, memory, size_bytes, source, host_id,
	disk_image, memory_image, bucket, manifest_key, reason, created_at, updated_at`

// CreateSnapshot implements store.Store.
func (s *Store) CreateSnapshot(ctx context.Context, sn sandbox.Snapshot) error {
	src, err := json.Marshal(sn.Source)
	if err != nil {
		return fmt.Errorf("create snapshot %q: %w", sn.ID, err)
	}
	created := ts(sn.CreatedAt, now())
	tag, err := s.pool.Exec(ctx, `INSERT INTO snapshots (`+snapshotCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) ON CONFLICT DO NOTHING`,
		sn.ID, sn.OrgID, sn.SandboxID, sn.Name, string(sn.Kind), string(sn.State), sn.Memory, sn.SizeBytes, string(src),
		sn.HostID, sn.DiskImage, sn.MemoryImage, sn.Bucket, sn.ManifestKey, sn.Reason, created, ts(sn.UpdatedAt, created))
	if err != nil {
		return wrap(fmt.Sprintf("create snapshot %q", sn.ID), err)
	}
	return conflictUnlessInserted(tag, "snapshot", sn.ID)
}

// GetSnapshot implements store.Store.
func (s *Store) GetSnapshot(ctx context.Context, orgID, id string) (sandbox.Snapshot, error) {
	sn, err := getOne(s.pool.QueryRow(ctx, `SELECT `+snapshotCols+` FROM snapshots WHERE id = $1`, id), dec.Snapshot, "snapshot", id)
	if err == nil && orgID != "" && sn.OrgID != orgID {
		return sandbox.Snapshot{}, fmt.Errorf("snapshot %q: %w", id, store.ErrNotFound)
	}
	return sn, err
}

// UpdateSnapshot implements store.Store.
func (s *Store) UpdateSnapshot(ctx context.Context, sn sandbox.Snapshot) (sandbox.Snapshot, error) {
	src, err := json.Marshal(sn.Source)
	if err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("update snapshot %q: %w", sn.ID, err)
	}
	return getOne(s.pool.QueryRow(ctx, `UPDATE snapshots SET name = $1, kind = $2, state = $3, memory = $4, size_bytes = $5,
		source = $6, host_id = $7, disk_image = $8, memory_image = $9, bucket = $10, manifest_key = $11, reason = $12, updated_at = $13
		WHERE id = $14 RETURNING `+snapshotCols,
		sn.Name, string(sn.Kind), string(sn.State), sn.Memory, sn.SizeBytes, string(src), sn.HostID, sn.DiskImage,
		sn.MemoryImage, sn.Bucket, sn.ManifestKey, sn.Reason, now(), sn.ID), dec.Snapshot, "snapshot", sn.ID)
}

// ListSnapshots implements store.Store.
func (s *Store) ListSnapshots(ctx context.Context, f store.SnapshotFilter) ([]sandbox.Snapshot, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, v string }{
		{"org_id", f.OrgID}, {"sandbox_id", f.SandboxID}, {"kind", string(f.Kind)}, {"state", string(f.State)},
	} {
		if c.v != "" {
			args = append(args, c.v)
			where = append(where, c.col+" = $"+strconv.Itoa(len(args)))
		}
	}
	q := `SELECT ` + snapshotCols + ` FROM snapshots`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	out, err := queryAll(ctx, s.pool, dec.Snapshot, q+` ORDER BY created_at DESC, id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	return out, nil
}

// DeleteSnapshot implements store.Store.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM snapshots WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete snapshot %q: %w", id, err)
	}
	return nil
}
