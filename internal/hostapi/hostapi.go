// Package hostapi is the contract between the control plane and a
// sandbox host: the Host interface the control plane drives, its optional
// abilities (snapshots, network changes, cheap disk usage), and the
// requests and answers they exchange. internal/controlplane calls it and
// internal/host implements it; neither imports the other, so a host
// process needs none of the store, transports or webhook code
// (docs/ARCHITECTURE.md draws the layers).
package hostapi

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Host is what the control plane needs of a sandbox host. The host layer
// (internal/host) implements it; tests may use a fake.
type Host interface {
	// ID names the host (host_…).
	ID() string
	// Templates lists the template slugs this host can build.
	Templates() []string
	// Classes lists the runtime classes this host runs.
	Classes() []string
	// Info describes the host for GET /v1/hosts.
	Info() HostInfo
	// BuildTemplate builds slug as version versionID and returns the
	// read-only rootfs path and its size. progress receives short lines.
	BuildTemplate(ctx context.Context, slug, versionID string, progress func(string)) (rootfs string, size int64, err error)
	// Start makes sure the sandbox runs: it creates what is missing (disk,
	// network, container) and reuses what exists, so it is safe to call
	// again after a crash. It returns once the agent answers.
	Start(ctx context.Context, spec StartSpec) (Instance, error)
	// Running reports whether the sandbox's container runs and its agent
	// answers.
	Running(ctx context.Context, id string) bool
	// Stop stops the sandbox, keeping its disk and address. With
	// keepMemory it keeps the processes where the host can (frozen in RAM,
	// or checkpointed to disk) and reports whether it did; otherwise, or
	// when it cannot, the processes end and only the disk stays (and a
	// checkpoint is dropped). Idempotent.
	Stop(ctx context.Context, id string, keepMemory bool) (memoryKept bool, err error)
	// Frozen reports whether a stopped sandbox still holds its memory in
	// RAM (the warm window and budget apply). A checkpoint on disk is not
	// frozen: it costs no RAM and the next start restores it whenever it
	// comes.
	Frozen(ctx context.Context, id string) bool
	// DiskImage stops the sandbox disk-only if needed and returns the path
	// of its disk image, for archiving. ErrNotFound when it has none.
	DiskImage(ctx context.Context, id string) (string, error)
	// DiskImagePath is where a restored disk image must be written.
	DiskImagePath(id string) string
	// RemoveDisk deletes the sandbox's local disk image. Idempotent.
	RemoveDisk(ctx context.Context, id string) error
	// Resize changes a running sandbox's CPU and memory in place; a
	// memory limit below what the sandbox uses wraps sandbox.ErrConflict.
	Resize(ctx context.Context, id string, cpu float64, ramMB int) error
	// GrowDisk grows the sandbox's disk (online when it runs).
	GrowDisk(ctx context.Context, id string, newGB int) error
	// Metrics reads live figures of a running sandbox.
	Metrics(ctx context.Context, id string) (Metrics, error)
	// Destroy removes every host resource of the sandbox. Idempotent.
	Destroy(ctx context.Context, id string) error
}

// StartSpec is what a host needs to run one sandbox.
type StartSpec struct {
	ID         string
	RootFS     string // template version's read-only rootfs
	CPU        float64
	RAMMB      int
	DiskGB     int
	AgentToken string
	// Runtime is the runtime class (runc, gvisor); empty means runc.
	Runtime string
	// Clone, when set, starts the sandbox from a snapshot (clone, fork,
	// restore in place) instead of its own state; see snapshots.go.
	Clone *CloneSpec
	// Network is the sandbox's egress policy and the secrets its egress
	// proxy injects (network.go); nil is the default policy.
	Network *NetworkSpec
	// GPUs is how many of the host's GPUs the sandbox gets (docs/gpus.md),
	// of GPUModel when set (a case-insensitive part of the model name).
	GPUs     int
	GPUModel string
}

// Instance is a running sandbox as its host reports it.
type Instance struct {
	// Address is the sandbox's IP; its agent listens on AgentPort there.
	Address string
	// MemoryRestored is true when the start brought the processes back
	// (a thaw or a restore), false for a cold boot from disk.
	MemoryRestored bool
	// RestoreFailure says why a start that had memory to restore (a
	// checkpoint) booted cold from disk instead; empty otherwise.
	RestoreFailure string
}

// AgentPort is where pt-agent listens inside every sandbox.
const AgentPort = 49983

// AgentPath is where the pt-agent binary appears inside every sandbox
// (bound read-only), for commands that run one of its other modes there.
const AgentPath = "/.pt/pt-agent"

// HostInfo describes a host: its runtime classes and what each supports.
type HostInfo struct {
	ID      string
	Gateway string
	Classes []ClassInfo
	// LXCFS is true when sandboxes see their own /proc/meminfo.
	LXCFS bool
	// GPUs are the host's NVIDIA GPUs (docs/gpus.md); GPUDriver the
	// driver's version; GPUProblem says why GPUs the host has cannot be
	// given to sandboxes.
	GPUs       []GPU
	GPUDriver  string
	GPUProblem string
}

// GPU is one GPU of a host.
type GPU struct {
	Index    int
	Model    string
	UUID     string
	MemoryMB int
	// Device is its node on the host (/dev/nvidia0).
	Device string
	// CDIDevice is the CDI device that gives a container this GPU
	// ("nvidia.com/gpu=0"); empty when none does, and then no sandbox can
	// have it.
	CDIDevice string
}

// Usable reports whether a sandbox can be given the GPU.
func (g GPU) Usable() bool { return g.CDIDevice != "" }

// MatchGPUModel reports whether a GPU's model is the one a sandbox asked
// for: a case-insensitive substring ("a100" matches "NVIDIA
// A100-SXM4-40GB"); an empty ask matches any.
func MatchGPUModel(model, want string) bool {
	return want == "" || strings.Contains(strings.ToLower(model), strings.ToLower(strings.TrimSpace(want)))
}

// ClassInfo is one runtime class on a host.
type ClassInfo struct {
	Name string
	// StopKeepsMemory says how a stop keeps memory: "checkpoint" (to disk,
	// no RAM held) or "freeze" (in RAM, for the warm window).
	StopKeepsMemory string
	// Checkpoint is true when the class can write memory to disk
	// (runsc; runc only with CRIU >= 4.1); CheckpointReason says why not.
	Checkpoint       bool
	CheckpointReason string
	// NoLiveResize says why a running sandbox of this class cannot change
	// cpu or ram_mb live (the guest keeps its boot size); empty when it can.
	NoLiveResize string
}

// NetworkSpec is what a host enforces on one sandbox's traffic: the
// policy, and the secrets its egress proxy swaps in (values in the clear,
// held only in the host's memory).
type NetworkSpec struct {
	Policy  sandbox.NetworkPolicy
	Secrets []SecretSpec
}

// SecretSpec is one secret as the egress proxy needs it.
type SecretSpec struct {
	Name, Placeholder, Value string
	// Hosts the value may go to; empty means any host.
	Hosts []string
	// Body replaces the placeholder in request bodies too.
	Body bool
}

// NetworkSetter is a Host that can change a running sandbox's network
// policy in place (internal/host does). Without it a policy change
// applies at the next start.
type NetworkSetter interface {
	// SetNetwork applies spec to the sandbox's traffic at once. It returns
	// an error wrapping sandbox.ErrNotFound when the sandbox has no network
	// on the host.
	SetNetwork(ctx context.Context, id string, spec *NetworkSpec) error
}

// CloneSpec says how a sandbox starts from a snapshot instead of from its
// own state: a clone or fork (a new sandbox) or a restore in place.
type CloneSpec struct {
	// SnapshotID names the snapshot whose disk image becomes the sandbox's
	// disk when it has none yet; empty when the disk is in place already
	// (restore in place, a backup restored into the sandbox's image).
	SnapshotID string
	// MemoryImage is the checkpoint directory to restore the processes
	// from; empty for a cold boot on the copied disk.
	MemoryImage string
	// SourceAgentToken is the agent token held in the memory image (the
	// source sandbox's): the host re-keys the restored agent with it.
	SourceAgentToken string
	// NewIdentity gives the copy its own hostname, /etc/machine-id and
	// fresh entropy once it runs.
	NewIdentity bool
}

// SnapshotFiles are where a host keeps one snapshot.
type SnapshotFiles struct {
	DiskImage   string
	MemoryImage string
	SizeBytes   int64
}

// Snapshotter is a host's ability to snapshot sandboxes (internal/host has
// it; test fakes may not, and then every snapshot call is unavailable).
type Snapshotter interface {
	// MemorySnapshots reports whether a running sandbox of class can have
	// its memory snapshotted (checkpointed while it keeps running) on this
	// host and, when not, why.
	MemorySnapshots(class string) (ok bool, reason string)
	// Snapshot copies the sandbox's disk (filesystem freeze + reflink) and,
	// with memory, checkpoints its processes while they keep running; of a
	// stopped sandbox, memory is the checkpoint image its stop kept, if any
	// (MemoryImage is empty when it kept none). It returns
	// sandbox.ErrConflict when memory is asked of a running sandbox whose
	// class cannot checkpoint.
	Snapshot(ctx context.Context, id, snapID, class string, memory bool) (SnapshotFiles, error)
	// RemoveSnapshot deletes a snapshot's files. Idempotent.
	RemoveSnapshot(ctx context.Context, snapID string) error
	// RestoreDisk stops the sandbox disk-only and replaces its disk with
	// the snapshot's, atomically. Idempotent.
	RestoreDisk(ctx context.Context, id, snapID string) error
}

// CheckpointImporter is an optional Host ability: giving a stopped
// sandbox a checkpoint image written on another host (a stop snapshot's
// memory, docs/ARCHITECTURE.md "Stop snapshots"), which its next start
// restores as if its stop here had written it.
type CheckpointImporter interface {
	// ImportCheckpoint replaces the sandbox's image with the one fill
	// writes into dir, for runtime class. The image counts only once fill
	// returned nil and it is in place: a failure or crash midway leaves
	// none.
	ImportCheckpoint(ctx context.Context, id, class string, fill func(ctx context.Context, dir string) error) error
}

// Metrics are live figures of a running sandbox.
type Metrics struct {
	CPUPercent       float64
	MemoryUsedBytes  uint64
	MemoryLimitBytes uint64
	DiskUsedBytes    uint64
	DiskSizeBytes    uint64
	NetRxBytes       uint64
	NetTxBytes       uint64
	Pids             uint64
	At               time.Time
}

// DiskUsageReader is an optional Host method: a sandbox's disk used and
// total bytes without the runtime calls and CPU sampling window Metrics
// costs. Autogrow reads it for every running sandbox on every timer tick.
type DiskUsageReader interface {
	DiskUsage(ctx context.Context, id string) (used, size uint64, err error)
}

// Templater is a host's ability to make custom templates (internal/host
// has it; docs/templates.md): images pulled or imported into its layer
// store, versions flattened from layers, a build's diff captured from a
// build sandbox's disk snapshot. Its image errors are *ImageError.
type Templater interface {
	// ResolveImage checks that ref exists and that auth may pull it,
	// reading its manifests and config only, and describes its
	// linux/amd64 image (layers not fetched).
	ResolveImage(ctx context.Context, ref string, auth RegistryAuth) (ImageInfo, error)
	// PullImage stores every layer of ref not stored yet.
	PullImage(ctx context.Context, ref string, auth RegistryAuth, progress func(ImageEvent)) (ImageInfo, error)
	// ImportImage stores the image of a `docker save` or OCI-layout tar.
	ImportImage(ctx context.Context, r io.Reader, progress func(ImageEvent)) (ImageInfo, error)
	// MakeTemplate writes version versionID's read-only rootfs: base (a
	// rootfs path, or empty) with layers on top. It returns its path and
	// size. Calling it again replaces a half-made one.
	MakeTemplate(ctx context.Context, versionID, base string, layers []string) (rootfs string, size int64, err error)
	// CaptureDiff stores what a build sandbox changed (the upper dir of
	// disk snapshot snapID, minus what the host itself put there) as a
	// layer and returns its diff ID.
	CaptureDiff(ctx context.Context, snapID string) (string, error)
	// RemoveTemplate deletes a version's rootfs. Idempotent.
	RemoveTemplate(ctx context.Context, versionID string) error
	// PruneLayers removes stored layers not in keep.
	PruneLayers(ctx context.Context, keep map[string]bool) error
}

// TemplateCopies is a host's ability to hold its own copy of a template
// version another host built (internal/host has it; docs/ARCHITECTURE.md,
// "Template versions on every host"). A version's copy lives under the
// host's own data dir, named by the version ID alone, so no host ever
// needs another's path. Without it a host boots a version's recorded
// path as is.
type TemplateCopies interface {
	// TemplatePath returns where version versionID's rootfs is kept on
	// this host, and whether it is there. A rootfs is written whole or not
	// at all (a temporary sibling renamed into place), so one that is
	// there is complete. Its directory is the version's own, which
	// RemoveTemplate removes whole: callers may keep scratch files in it.
	TemplatePath(versionID string) (rootfs string, ok bool, err error)
	// ExportTemplate writes the rootfs at rootfs as a tar to w.
	ExportTemplate(ctx context.Context, rootfs string, w io.Writer) error
	// ImportTemplate unpacks a tar ExportTemplate wrote as version
	// versionID's rootfs on this host, replacing a half-made one, and
	// returns its path and size.
	ImportTemplate(ctx context.Context, versionID string, r io.Reader) (rootfs string, size int64, err error)
	// TemplateDirs lists the versions this host keeps files of (built
	// here or copied), for the sweep of those whose record is gone.
	TemplateDirs() ([]TemplateDir, error)
}

// TemplateDir is one version's directory on a host.
type TemplateDir struct {
	VersionID string
	// ModTime is the directory's: when an entry was last added or
	// removed (a build or a copy starting writes one).
	ModTime time.Time
}

// RegistryAuth is one registry's credentials (never logged).
type RegistryAuth struct {
	Username, Password, Token string
}

// ImageEvent is a pull or import's progress.
type ImageEvent struct {
	Layer        string
	Bytes, Total int64
	Cached, Done bool
	Message      string
}

// ImageInfo is an image whose layers are stored on the host.
type ImageInfo struct {
	Digest string
	Layers []string
	Size   int64
	// Env, User, WorkingDir, Entrypoint, Cmd, Labels and ExposedPorts are
	// the image config's.
	Env          []string
	User         string
	WorkingDir   string
	Entrypoint   []string
	Cmd          []string
	Labels       map[string]string
	ExposedPorts []string
}

// ImageError is an image that cannot be used, with a stable code:
// image_not_found, image_unauthorized, image_digest_mismatch,
// image_invalid, image_layer_unsafe, image_too_large or
// registry_unavailable. It unwraps to the cause, which carries the
// sandbox category.
type ImageError struct {
	Code string
	Err  error
}

func (e *ImageError) Error() string { return e.Err.Error() }
func (e *ImageError) Unwrap() error { return e.Err }
