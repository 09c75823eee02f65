package sandbox

import "time"

// PrefixBackup names backups (bkp_…): snapshots whose disk lives in the
// object store, restorable on any host.
const PrefixBackup = "bkp_"

// SnapshotKind says where a snapshot's data lives.
type SnapshotKind string

// Snapshot kinds.
const (
	// KindSnapshot is a local snapshot: a reflink copy of the disk image
	// (and a checkpoint image when it holds memory) on the sandbox's host.
	KindSnapshot SnapshotKind = "snapshot"
	// KindBackup is an off-host backup: the disk image as content-addressed
	// chunks in the object store, with a manifest and a descriptor.
	KindBackup SnapshotKind = "backup"
)

// SnapshotState is a snapshot's (or backup's) progress.
type SnapshotState string

// Snapshot states. A snapshot is usable only when ready; a backup is
// ready ("complete") only once its manifest and descriptor are written.
const (
	SnapshotCreating SnapshotState = "creating"
	SnapshotReady    SnapshotState = "ready"
	SnapshotFailed   SnapshotState = "failed"
)

// SnapshotSource is what a clone of the snapshot needs of the sandbox it
// was taken from: the same template version, size and runtime class.
type SnapshotSource struct {
	Template          string  `json:"template"`
	TemplateVersionID string  `json:"template_version_id"`
	CPU               float64 `json:"cpu"`
	RAMMB             int     `json:"ram_mb"`
	DiskGB            int     `json:"disk_gb"`
	Runtime           string  `json:"runtime"`
}

// Snapshot is the stored record of one snapshot or backup of a sandbox.
type Snapshot struct {
	// ID is snap_… for snapshots and bkp_… for backups.
	ID        string        `json:"id"`
	OrgID     string        `json:"org_id"`
	SandboxID string        `json:"sandbox_id"`
	Name      string        `json:"name,omitempty"`
	Kind      SnapshotKind  `json:"kind"`
	State     SnapshotState `json:"state"`
	// Memory is true when the snapshot holds the processes' memory (a
	// checkpoint image) besides the disk.
	Memory bool `json:"memory"`
	// SizeBytes is the disk image's apparent size (plus the memory image).
	SizeBytes int64          `json:"size_bytes"`
	Source    SnapshotSource `json:"source"`
	// HostID is the host holding a local snapshot's files.
	HostID string `json:"host_id,omitempty"`
	// DiskImage and MemoryImage are host paths of a local snapshot's disk
	// image and checkpoint directory ("" without memory).
	DiskImage   string `json:"-"`
	MemoryImage string `json:"-"`
	// Bucket and ManifestKey locate a backup's archive manifest; the
	// descriptor other hosts read is next to it (DescriptorKey).
	Bucket      string `json:"bucket,omitempty"`
	ManifestKey string `json:"manifest_key,omitempty"`
	// Reason says why a snapshot failed.
	Reason string `json:"reason,omitempty"`
	// Progress is how far a backup's upload got (in memory only, filled
	// in by reads).
	Progress  *Progress `json:"progress,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}
