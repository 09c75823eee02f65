package store

import (
	"context"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// SnapshotFilter selects snapshots for ListSnapshots. Empty fields match
// everything.
type SnapshotFilter struct {
	// OrgID: empty matches every org (internal callers only).
	OrgID     string
	SandboxID string
	Kind      sandbox.SnapshotKind
	State     sandbox.SnapshotState
}

// SnapshotStore keeps snapshot and backup records. Store embeds it.
type SnapshotStore interface {
	// CreateSnapshot inserts a snapshot record; ErrConflict if the ID
	// exists. Zero CreatedAt/UpdatedAt mean now.
	CreateSnapshot(ctx context.Context, s sandbox.Snapshot) error
	// GetSnapshot returns the snapshot with that ID in that org (any org
	// when orgID is empty); ErrNotFound if absent or in another org.
	GetSnapshot(ctx context.Context, orgID, id string) (sandbox.Snapshot, error)
	// UpdateSnapshot replaces a snapshot's mutable fields (state, size,
	// locations, reason); ID, OrgID, SandboxID and CreatedAt never change,
	// UpdatedAt is set to now. ErrNotFound if absent.
	UpdateSnapshot(ctx context.Context, s sandbox.Snapshot) (sandbox.Snapshot, error)
	// ListSnapshots returns the matching snapshots, newest first (created_at
	// desc, then id desc); empty, not an error, when none match.
	ListSnapshots(ctx context.Context, f SnapshotFilter) ([]sandbox.Snapshot, error)
	// DeleteSnapshot removes a snapshot record. It is idempotent.
	DeleteSnapshot(ctx context.Context, id string) error
}
