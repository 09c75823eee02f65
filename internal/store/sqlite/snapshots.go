package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
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
	created := formatTime(sn.CreatedAt, now())
	updated := created
	if !sn.UpdatedAt.IsZero() {
		updated = sandbox.FormatTime(sn.UpdatedAt)
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO snapshots (`+snapshotCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		sn.ID, sn.OrgID, sn.SandboxID, sn.Name, string(sn.Kind), string(sn.State), sn.Memory, sn.SizeBytes, string(src),
		sn.HostID, sn.DiskImage, sn.MemoryImage, sn.Bucket, sn.ManifestKey, sn.Reason, created, updated)
	if err != nil {
		return fmt.Errorf("create snapshot %q: %w", sn.ID, err)
	}
	return conflictUnlessInserted(res, "snapshot", sn.ID)
}

// GetSnapshot implements store.Store.
func (s *Store) GetSnapshot(ctx context.Context, orgID, id string) (sandbox.Snapshot, error) {
	sn, err := getOne(s.r.QueryRowContext(ctx, `SELECT `+snapshotCols+` FROM snapshots WHERE id = ?`, id), dec.Snapshot, "snapshot", id)
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
	res, err := s.w.ExecContext(ctx, `UPDATE snapshots SET name = ?, kind = ?, state = ?, memory = ?, size_bytes = ?,
		source = ?, host_id = ?, disk_image = ?, memory_image = ?, bucket = ?, manifest_key = ?, reason = ?, updated_at = ?
		WHERE id = ?`,
		sn.Name, string(sn.Kind), string(sn.State), sn.Memory, sn.SizeBytes, string(src), sn.HostID, sn.DiskImage,
		sn.MemoryImage, sn.Bucket, sn.ManifestKey, sn.Reason, sandbox.FormatTime(now()), sn.ID)
	if err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("update snapshot %q: %w", sn.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("update snapshot %q: %w", sn.ID, err)
	} else if n == 0 {
		return sandbox.Snapshot{}, fmt.Errorf("snapshot %q: %w", sn.ID, store.ErrNotFound)
	}
	return s.GetSnapshot(ctx, "", sn.ID)
}

// ListSnapshots implements store.Store.
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
	out, err := queryAll(ctx, s.r, dec.Snapshot, q+` ORDER BY created_at DESC, id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	return out, nil
}

// DeleteSnapshot implements store.Store.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM snapshots WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete snapshot %q: %w", id, err)
	}
	return nil
}
