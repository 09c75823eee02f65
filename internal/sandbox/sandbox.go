// Package sandbox holds Platinum's domain types: sandbox records, states and
// their transitions, IDs, validation and the small fixed set of error
// categories every layer wraps. It does no I/O, so every other package can
// depend on it without pulling in storage, networking or runtimes.
package sandbox

import (
	"fmt"
	"time"
)

// State is a sandbox's lifecycle state as stored and as shown by the API.
type State string

// The states of a sandbox's lifecycle (docs/lifecycle.md). Transitional states (creating,
// starting, stopping, archiving, restoring, deleting) always have a way out.
const (
	StateCreating  State = "creating"
	StateStarting  State = "starting"
	StateRunning   State = "running"
	StateStopping  State = "stopping"
	StateStopped   State = "stopped"
	StateArchiving State = "archiving"
	StateArchived  State = "archived"
	StateRestoring State = "restoring"
	StateDeleting  State = "deleting"
	StateDeleted   State = "deleted"
	StateFailed    State = "failed"
)

// AllStates lists every state, for validation of filters.
var AllStates = []State{
	StateCreating, StateStarting, StateRunning, StateStopping, StateStopped,
	StateArchiving, StateArchived, StateRestoring, StateDeleting, StateDeleted, StateFailed,
}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, k := range AllStates {
		if s == k {
			return true
		}
	}
	return false
}

// Live reports whether a sandbox in state s still exists for the user:
// everything but deleting and deleted.
func (s State) Live() bool { return s != StateDeleting && s != StateDeleted }

// Sandbox is the stored record of one sandbox.
type Sandbox struct {
	ID                string  `json:"id"`
	OrgID             string  `json:"org_id"`
	Name              string  `json:"name,omitempty"`
	State             State   `json:"state"`
	Template          string  `json:"template"`
	TemplateVersionID string  `json:"template_version_id"`
	CPU               float64 `json:"cpu"`
	RAMMB             int     `json:"ram_mb"`
	DiskGB            int     `json:"disk_gb"`
	// EnvKeys are the names of the sandbox's environment variables; values
	// live in Env, which is never serialised to API clients.
	Env      map[string]string `json:"-"`
	Metadata map[string]string `json:"metadata"`
	HostID   string            `json:"host_id,omitempty"`
	// ParentID is set once at create; the parent groups its children.
	ParentID string `json:"parent_id,omitempty"`
	// ProjectID is the project (prj_…) the sandbox was created in; it
	// never changes.
	ProjectID string `json:"project_id,omitempty"`
	// Address is the sandbox's IP on its host bridge; AgentToken guards its
	// pt-agent. Neither is shown to API clients except the agent token where
	// a compatibility surface needs it.
	Address    string `json:"-"`
	AgentToken string `json:"-"`
	// Reason explains the current state when it is failed or deleted.
	Reason string `json:"reason,omitempty"`
	// DeletedBy records who caused a deletion: DeletedByPlatform for the
	// platform's own decisions (a TTL expiry, pool upkeep), DeletedByUser
	// for a caller's DELETE or a timer the customer configured. Final
	// disposal reads it, never Reason's text, to grant a platform
	// deletion's longer keeping of recovery data.
	DeletedBy string `json:"deleted_by,omitempty"`
	// ExpiresAt, when set, is when ExpiryAction happens to the sandbox
	// (a TTL, e.g. E2B's timeout or ttl_ms).
	ExpiresAt    *time.Time   `json:"expires_at,omitempty"`
	ExpiryAction ExpiryAction `json:"expiry_action,omitempty"`
	// TTLMs is the lifetime last asked for (ttl_ms, at create or
	// by a TTL reset); ExpiresAt counts it from that request. 0: none.
	TTLMs int64 `json:"ttl_ms,omitempty"`
	// Status is the sandbox's status, derived on reads (see StatusOf); it is
	// never stored.
	Status Status `json:"-"`
	// TemplateVersion is the number (1, 2, …) of TemplateVersionID among
	// its slug's builds, derived on reads.
	TemplateVersion int `json:"-"`
	// LastStart says what the latest start brought back.
	LastStart *LastStart `json:"last_start,omitempty"`
	// Retention holds the lifecycle timers chosen at create.
	Retention Retention `json:"retention"`
	// LastActivityAt is the last exec, file or preview traffic (or start):
	// the auto-stop timer counts from it.
	LastActivityAt *time.Time `json:"last_activity_at,omitempty"`
	// StoppedAt is when the sandbox last reached stopped; auto-archive
	// counts from it.
	StoppedAt *time.Time `json:"stopped_at,omitempty"`
	// StopSnapshot is the newest complete stop snapshot (a copy of the
	// stopped disk in the object store), from which any host may start
	// the sandbox while it is current (StartsOn).
	StopSnapshot *StopSnapshotRef `json:"stop_snapshot,omitempty"`
	// Secrets are sealed at rest and never returned; inside the sandbox
	// each appears only as its Placeholder in the environment.
	Secrets map[string]Secret `json:"-"`
	// Progress is how far a long operation (archive, restore) got; it
	// lives in memory only and is filled in by reads.
	Progress *Progress `json:"-"`
	// Runtime is the sandbox's runtime class (runc, gvisor).
	Runtime string `json:"runtime,omitempty"`
	// Network is the outbound network policy; nil is the default (egress
	// allowed, no lists). It is enforced on the host at every start.
	Network *NetworkPolicy `json:"network,omitempty"`
	// APIToken is the sandbox-scoped token (sealed) its processes get as
	// PT_TOKEN.
	APIToken string `json:"-"`
	// IdempotencyTag names the keyed create that made the sandbox (a hash
	// of token scope and key), written with the record, so a retry that
	// takes over a crashed request's key finds it instead of creating a
	// second sandbox.
	IdempotencyTag string `json:"-"`
	// Live is the live-resize headroom recorded at the last boot.
	Live *LiveHeadroom `json:"live,omitempty"`
	// Start says how the create got the sandbox running: StartWarm (a
	// warm pool's sandbox, booted ahead and handed over) or StartCold
	// (booted for this create). Empty for sandboxes made before it was
	// recorded.
	Start string `json:"start,omitempty"`
	// NoAutoResume turns off starting the sandbox from preview traffic
	// (docs/lifecycle.md, "Auto-resume"; the API field is auto_resume, default true).
	NoAutoResume bool `json:"no_auto_resume,omitempty"`
	// SSHKeys are the public keys (authorized_keys form, no comments) the
	// SSH gateway accepts for this sandbox; the API shows fingerprints.
	SSHKeys []string `json:"-"`
	// GPUs is how many of its host's GPUs the sandbox gets at each start,
	// of GPUModel when set (docs/gpus.md).
	GPUs     int    `json:"gpus,omitempty"`
	GPUModel string `json:"gpu_model,omitempty"`
	// Preview holds the preview proxy's public ports and token
	// generations; nil until a port is made public or revoked.
	Preview *Preview `json:"-"`
	// Archive points at the sandbox's disk in the object store while it is
	// archived (and after, as recovery data, until disposal).
	Archive *ArchiveRef `json:"archive,omitempty"`
	// SourceSnapshotID is the snapshot or backup the sandbox was cloned
	// (or forked) from; provisioning copies its disk (and memory).
	SourceSnapshotID string `json:"source_snapshot_id,omitempty"`
	// RestoreSnapshotID is the snapshot a restore in place (state
	// restoring) is rolling the sandbox back to; empty otherwise.
	RestoreSnapshotID string `json:"-"`
	// Version increments on every update; stores use it for optimistic
	// concurrency (compare-and-swap).
	Version   int64      `json:"-"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// Limits the API enforces on create.
const (
	MinRAMMB    = 128
	MaxRAMMB    = 256 * 1024
	MaxCPU      = 64
	MaxDiskGB   = 2048
	DefaultCPU  = 1
	DefaultRAM  = 512
	DefaultDisk = 2
)

// TimeFormat is the API's timestamp format: UTC ISO 8601 with six
// fractional digits, so rows created within one millisecond keep a stable,
// distinct order across pages.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// FormatTime renders t in TimeFormat.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// FieldError is an ErrInvalidArgument naming the offending field, so the
// API can tell the user exactly what to fix.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Reason) }

// Unwrap makes errors.Is(err, ErrInvalidArgument) hold.
func (e *FieldError) Unwrap() error { return ErrInvalidArgument }

// ExpiryAction is what happens when a sandbox's TTL runs out.
type ExpiryAction string

// Expiry actions.
const (
	ExpireDelete ExpiryAction = "delete"
	ExpireStop   ExpiryAction = "stop"
)

// Restore kinds of a start (docs/stop-start.md, "What a start restored").
const (
	RestoreMemory   = "memory"
	RestoreDiskOnly = "disk_only"
)

// How a create got its sandbox running (Sandbox.Start).
const (
	StartWarm = "warm"
	StartCold = "cold"
)

// StopSnapshotRef names a sandbox's stop snapshot and when it was taken.
type StopSnapshotRef struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// Where a stopped or archived sandbox may start (Sandbox.StartsOn).
const (
	// StartsOnAnyHost: its disk is in the object store (a current stop
	// snapshot, or an archive), so any host that runs its class can start
	// it.
	StartsOnAnyHost = "any_host"
	// StartsOnOwnHost: its disk is only on its host (HostID), which must
	// start it.
	StartsOnOwnHost = "own_host"
)

// StartsOn says where a stopped or archived sandbox may start ("" in any
// other state): any host when its disk is in the object store — archived,
// or stopped with a stop snapshot taken at or after its stop — else its
// own host.
func (sb Sandbox) StartsOn() string {
	switch sb.State {
	case StateArchived:
		return StartsOnAnyHost
	case StateStopped:
		if sb.StopSnapshot != nil && sb.StopSnapshot.Current(sb.StoppedAt) {
			return StartsOnAnyHost
		}
		return StartsOnOwnHost
	}
	return ""
}

// Current reports whether a stop snapshot taken at r.At holds the disk as
// it was at the stop at stoppedAt (taken at or after it; the store keeps
// microseconds).
func (r StopSnapshotRef) Current(stoppedAt *time.Time) bool {
	return stoppedAt != nil && !r.At.Before(stoppedAt.Truncate(time.Microsecond))
}

// LastStart is what a start that reached running brought back.
type LastStart struct {
	Restore     string    `json:"restore"`
	RAMRestored bool      `json:"ram_restored"`
	Reason      string    `json:"reason,omitempty"`
	At          time.Time `json:"at"`
}

// Retention is a sandbox's lifecycle timers (docs/lifecycle.md). Zero
// disables a timer.
type Retention struct {
	Type            string `json:"type"`
	AutoStopMinutes int    `json:"auto_stop_minutes"`
	AutoArchiveDays int    `json:"auto_archive_days"`
	AutoDeleteDays  int    `json:"auto_delete_days"`
}

// Sandbox types and their retention defaults.
const (
	TypePersistent = "persistent"
	TypeEphemeral  = "ephemeral"
	TypeDev        = "dev"
)

// DefaultRetention returns the timers of a sandbox type, false when the
// type is unknown. Persistent sandboxes stop after an hour idle, archive
// after 7 days stopped and are never deleted by a timer; ephemeral ones
// stop after 15 idle minutes and are deleted when they stop; dev ones stop
// after 2 idle hours and archive after 30 days.
func DefaultRetention(typ string) (Retention, bool) {
	switch typ {
	case "", TypePersistent:
		return Retention{Type: TypePersistent, AutoStopMinutes: 60, AutoArchiveDays: 7}, true
	case TypeEphemeral:
		return Retention{Type: TypeEphemeral, AutoStopMinutes: 15}, true
	case TypeDev:
		return Retention{Type: TypeDev, AutoStopMinutes: 120, AutoArchiveDays: 30}, true
	}
	return Retention{}, false
}

// Who caused a deletion (Sandbox.DeletedBy).
const (
	DeletedByPlatform = "platform"
	DeletedByUser     = "user"
)

// ArchiveRef locates an archived disk in the object store.
type ArchiveRef struct {
	Bucket      string    `json:"bucket"`
	ManifestKey string    `json:"manifest_key"`
	SizeBytes   int64     `json:"size_bytes"`
	CreatedAt   time.Time `json:"created_at"`
	// Complete is true once the manifest is written.
	Complete bool `json:"complete"`
}

// LiveHeadroom bounds live CPU and memory resizes until the next cold boot.
type LiveHeadroom struct {
	MaxCPU   float64 `json:"max_cpu"`
	MaxRAMMB int     `json:"max_ram_mb"`
	// BootRAMMB is the memory the sandbox booted with: live shrinks go no
	// lower.
	BootRAMMB int `json:"boot_ram_mb"`
}

// Secret is one sealed secret of a sandbox.
type Secret struct {
	// Sealed is the value encrypted at rest (never the plaintext).
	Sealed string `json:"sealed"`
	// Placeholder is what the sandbox sees in its environment instead of
	// the value (pt_secret_…); the egress proxy swaps it for the value.
	Placeholder string `json:"placeholder"`
	// Hosts the value may be sent to; empty means any host.
	Hosts []string `json:"hosts,omitempty"`
	// Body lets the egress proxy replace the placeholder in request
	// bodies too (headers always).
	Body bool `json:"body,omitempty"`
}

// Progress is the progress of a long operation on a sandbox.
type Progress struct {
	Op         string `json:"op"`
	DoneBytes  int64  `json:"done_bytes"`
	TotalBytes int64  `json:"total_bytes"`
}
