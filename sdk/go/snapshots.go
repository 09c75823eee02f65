package platinum

import (
	"context"
	"fmt"
	"net/url"
	"time"
)

// SnapshotState is a snapshot's (or backup's) progress.
type SnapshotState string

// Snapshot states. A backup is complete once it is ready.
const (
	SnapshotCreating SnapshotState = "creating"
	SnapshotReady    SnapshotState = "ready"
	SnapshotFailed   SnapshotState = "failed"
)

// SnapshotSource is the sandbox a snapshot was taken of, as a clone gets
// it: template version, size and runtime class.
type SnapshotSource struct {
	Template          string  `json:"template"`
	TemplateVersionID string  `json:"template_version_id"`
	CPU               float64 `json:"cpu"`
	RAMMB             int     `json:"ram_mb"`
	DiskGB            int     `json:"disk_gb"`
	Runtime           string  `json:"runtime"`
}

// Snapshot is a snapshot (snap_…, kept on the sandbox's host) or a backup
// (bkp_…, kept in the object store, restorable on any host).
type Snapshot struct {
	ID        string        `json:"id"`
	Kind      string        `json:"kind"`
	SandboxID string        `json:"sandbox_id"`
	Name      string        `json:"name,omitempty"`
	State     SnapshotState `json:"state"`
	// Memory is true when the snapshot holds the processes' memory, so
	// restores and clones continue them rather than booting.
	Memory      bool           `json:"memory"`
	SizeBytes   int64          `json:"size_bytes"`
	Source      SnapshotSource `json:"source"`
	HostID      string         `json:"host_id,omitempty"`
	Bucket      string         `json:"bucket,omitempty"`
	ManifestKey string         `json:"manifest_key,omitempty"`
	// Complete is set on backups: true once manifest and descriptor are
	// written.
	Complete *bool  `json:"complete,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Progress shows how far a backup's upload got.
	Progress  *Progress `json:"progress,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SnapshotOptions tune Snapshot.
type SnapshotOptions struct {
	Name string `json:"name,omitempty"`
	// Memory: nil takes memory where the sandbox's runtime class can
	// (gvisor); new(true) insists (an APIError with code
	// memory_snapshot_unsupported where it cannot); new(false) copies the
	// disk only.
	Memory *bool `json:"memory,omitempty"`
	// IdempotencyKey, when set, makes a retried call return the first
	// call's snapshot instead of taking another.
	IdempotencyKey string `json:"-"`
}

// Snapshot takes a snapshot of a running or stopped sandbox: its disk
// (filesystem freeze + reflink copy, milliseconds) and, where the class
// can, its memory while it keeps running. It returns the ready snapshot.
func (s *SandboxesService) Snapshot(ctx context.Context, id string, opts SnapshotOptions) (*Snapshot, error) {
	var out Snapshot
	if err := s.c.doKeyed(ctx, "POST", sandboxPath(id)+"/snapshots", nil, opts.IdempotencyKey, opts, &out); err != nil {
		return nil, fmt.Errorf("snapshot sandbox %s: %w", id, err)
	}
	return &out, nil
}

// snapshotList is a list answer.
type snapshotList struct {
	Rows []Snapshot `json:"rows"`
}

// ListSnapshots returns a sandbox's snapshots, newest first.
func (s *SandboxesService) ListSnapshots(ctx context.Context, id string) ([]Snapshot, error) {
	var out snapshotList
	if _, err := s.c.doJSON(ctx, "GET", sandboxPath(id)+"/snapshots", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("list snapshots of %s: %w", id, err)
	}
	return out.Rows, nil
}

// ListBackups returns a sandbox's backups, newest first.
func (s *SandboxesService) ListBackups(ctx context.Context, id string) ([]Snapshot, error) {
	var out snapshotList
	if _, err := s.c.doJSON(ctx, "GET", sandboxPath(id)+"/backups", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("list backups of %s: %w", id, err)
	}
	return out.Rows, nil
}

func snapshotPath(id string) string { return "/v1/snapshots/" + url.PathEscape(id) }

// GetSnapshot returns a snapshot or backup by ID (snap_… or bkp_…).
// Another organization's gives an APIError with code not_found.
func (s *SandboxesService) GetSnapshot(ctx context.Context, snapshotID string) (*Snapshot, error) {
	return fetchJSON[Snapshot](ctx, s.c, "GET", snapshotPath(snapshotID), nil, nil, "get snapshot %s", snapshotID)
}

// DeleteSnapshot deletes a snapshot or backup (a backup's shared chunks
// stay for whatever else uses them).
func (s *SandboxesService) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	return callJSON(ctx, s.c, "DELETE", snapshotPath(snapshotID), nil, nil, "delete snapshot %s", snapshotID)
}

// Restore rolls the sandbox back to one of its snapshots in place: its
// disk, and its memory when the snapshot has it. With WaitForRunning it
// returns once the sandbox runs again (LastStart says what came back).
func (s *SandboxesService) Restore(ctx context.Context, id, snapshotID string, opts ...LifecycleOption) (*Sandbox, error) {
	var o lifecycleOptions
	for _, opt := range opts {
		opt.applyLifecycle(&o)
	}
	var out waitResponse
	body := map[string]string{"snapshot_id": snapshotID}
	if _, err := s.c.doJSON(ctx, "POST", sandboxPath(id)+"/restore", waitQuery(o.wait), body, &out); err != nil {
		if sb, ferr := failedWait(err, id, StateRunning); sb != nil {
			return sb, ferr
		}
		return nil, fmt.Errorf("restore sandbox %s: %w", id, err)
	}
	sb := &out.Sandbox
	if o.wait.state == "" || sb.State == StateRunning {
		return sb, nil
	}
	return s.waitForState(ctx, id, StateRunning, sb)
}

// ForkOptions tune Fork.
type ForkOptions struct {
	// Count is how many copies to make (default 1, at most 20).
	Count int `json:"count,omitempty"`
	// NoParent makes the copies top-level sandboxes instead of children of
	// the source.
	NoParent bool `json:"-"`
	// Wait returns once every copy runs (or failed).
	Wait bool `json:"wait,omitempty"`
	// Metadata is set on every copy over the source's metadata (the
	// copies' merged metadata has create's limits).
	Metadata map[string]string `json:"metadata,omitempty"`
	// IdempotencyKey, when set, makes a retried call return the first
	// call's copies instead of making more.
	IdempotencyKey string `json:"-"`
}

// ForkResult is what a fork made.
type ForkResult struct {
	SourceID string `json:"source_id"`
	// Memory is true when the copies continue from the source's memory;
	// otherwise they boot on copies of its disk and MemoryReason says why.
	Memory       bool      `json:"memory"`
	MemoryReason string    `json:"memory_reason,omitempty"`
	Sandboxes    []Sandbox `json:"sandboxes"`
	WaitTimedOut bool      `json:"wait_timed_out,omitempty"`
}

// Fork makes Count new running sandboxes from the current state of a
// running one, each with its own identity (hostname = its ID, a fresh
// /etc/machine-id, reseeded entropy), address and token. They are the
// source's children unless NoParent.
func (s *SandboxesService) Fork(ctx context.Context, id string, opts ForkOptions) (*ForkResult, error) {
	body := map[string]any{"count": max(opts.Count, 1), "wait": opts.Wait}
	if opts.NoParent {
		body["parent"] = false
	}
	if len(opts.Metadata) > 0 {
		body["metadata"] = opts.Metadata
	}
	var out ForkResult
	if err := s.c.doKeyed(ctx, "POST", sandboxPath(id)+"/fork", nil, opts.IdempotencyKey, body, &out); err != nil {
		return nil, fmt.Errorf("fork sandbox %s: %w", id, err)
	}
	return &out, nil
}

// BackupOptions tune Backup.
type BackupOptions struct {
	Name string `json:"name,omitempty"`
	// Wait returns once the backup is complete (or failed); OnProgress,
	// if set, sees every poll while it uploads.
	Wait       bool            `json:"-"`
	OnProgress func(*Snapshot) `json:"-"`
	// IdempotencyKey, when set, makes a retried call return the first
	// call's backup.
	IdempotencyKey string `json:"-"`
}

// Backup takes a disk snapshot of a running or stopped sandbox and streams
// it to the object store (bkp_…), restorable on any host with
// CreateSandboxRequest.FromBackup. Without Wait it returns the backup
// uploading (state creating).
func (s *SandboxesService) Backup(ctx context.Context, id string, opts BackupOptions) (*Snapshot, error) {
	var out Snapshot
	if err := s.c.doKeyed(ctx, "POST", sandboxPath(id)+"/backups", nil, opts.IdempotencyKey, opts, &out); err != nil {
		return nil, fmt.Errorf("backup sandbox %s: %w", id, err)
	}
	if !opts.Wait {
		return &out, nil
	}
	return s.WaitForSnapshot(ctx, out.ID, opts.OnProgress)
}

// WaitForSnapshot polls a snapshot or backup until it is ready (returned)
// or failed (returned with an error saying why). seen, if set, is called
// with every record read.
func (s *SandboxesService) WaitForSnapshot(ctx context.Context, snapshotID string, seen func(*Snapshot)) (*Snapshot, error) {
	for {
		snap, err := s.GetSnapshot(ctx, snapshotID)
		if err != nil {
			return nil, err
		}
		if seen != nil {
			seen(snap)
		}
		switch snap.State {
		case SnapshotReady:
			return snap, nil
		case SnapshotFailed:
			return snap, fmt.Errorf("%s %s failed: %s", snap.Kind, snap.ID, snap.Reason)
		}
		if err := sleep(ctx, s.c.pollInterval); err != nil {
			return snap, fmt.Errorf("wait for %s: %w", snapshotID, err)
		}
	}
}

// doKeyed is doJSON with an optional Idempotency-Key header.
func (c *Client) doKeyed(ctx context.Context, method, path string, query url.Values, key string, in, out any) error {
	_, err := c.doJSONKeyed(ctx, method, path, query, key, in, out)
	return err
}
