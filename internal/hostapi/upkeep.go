package hostapi

import (
	"context"
	"time"
)

// DiskChecker is a host that can say whether it still has a sandbox's
// disk. The reconciler asks before booting a running sandbox again after
// its host lost it: without its disk the sandbox cannot run again there,
// and the platform deletes it (host_lost) instead of failing it forever.
type DiskChecker interface {
	// HasDisk reports whether the host holds the sandbox's disk image.
	HasDisk(id string) bool
}

// SpaceChecker is a host that can say how much room its data dir has
// left. The control plane refuses creates and uploads with 507 no_space
// while it is under Config.MinFreeBytes, before making anything
// (space.go in internal/controlplane), rather than failing half-way.
type SpaceChecker interface {
	// DataDirFree returns the bytes an unprivileged writer can still
	// write to the filesystem of the host's data dir.
	DataDirFree() (uint64, error)
}

// Releaser is a host that can free what a sandbox holds on it while
// keeping its disk: a sandbox that ends failed holds no process, mount,
// loop device, address or cgroup, yet can be started again from its disk.
type Releaser interface {
	// Release ends the sandbox's container, unmounts its root filesystem
	// and disk (detaching the loop device), and gives back its network
	// namespace and address. The disk image stays. Idempotent.
	Release(ctx context.Context, id string) error
}

// Sweeper is a host that can list what sandboxes hold on it, found on the
// host itself (runtime state roots, cgroups, mounts, loop devices, network
// namespaces, disk images), so the reconciler can remove what no live
// record owns: a crashed or timed-out runtime call can leave a running
// container, and a failed cleanup its mounts, with nothing else pointing
// at them.
type Sweeper interface {
	// Holdings lists every sandbox holding something on the host.
	Holdings(ctx context.Context) ([]Holding, error)
}

// Holding is what one sandbox holds on a host.
type Holding struct {
	ID string
	// Container: a runtime container of any class, or processes in the
	// sandbox's cgroup.
	Container bool
	// Cgroup: its cgroup exists under the host's cgroup parent.
	Cgroup bool
	// Mounts: its root filesystem or disk is mounted, or a loop device is
	// backed by its disk image.
	Mounts bool
	// Network: its network namespace or endpoint (and address) exists.
	Network bool
	// Disk: its disk image or its directory in the data dir exists.
	Disk bool
}

// Live reports whether the sandbox holds anything besides its disk.
func (h Holding) Live() bool { return h.Container || h.Cgroup || h.Mounts || h.Network }

// OOMReporter is a host that reports the OOM kills in its sandboxes: the
// kernel's inside a runc sandbox's cgroup, the memory guard's inside a
// gVisor sandbox (pt-agent; gVisor has no OOM killer of its own), and the
// kernel's of a whole gVisor sandbox.
type OOMReporter interface {
	// WatchOOM makes sure the running sandbox's OOM kills are reported
	// (idempotent: the control plane calls it after every boot and on each
	// reconciler check). agentToken lets the host read the guard's kills.
	WatchOOM(id, agentToken string)
	// OOMEvents delivers the kills, as they happen.
	OOMEvents() <-chan OOMEvent
}

// OOM kill scopes (OOMEvent.Scope).
const (
	// OOMScopeProcess: one process was killed; the sandbox runs on.
	OOMScopeProcess = "process"
	// OOMScopeSandbox: the whole sandbox was ended (the host killed a
	// gVisor sandbox's Sentry); the control plane boots it again.
	OOMScopeSandbox = "sandbox"
)

// OOMEvent is one report of OOM kills in a sandbox.
type OOMEvent struct {
	SandboxID string
	Scope     string
	// Count is how many kills this report covers (the kernel's counter
	// moved by it); 1 for a guard kill.
	Count int
	// PID, Command and RSSBytes name the process the guard killed (gVisor;
	// the kernel does not say which process it killed in a runc sandbox).
	PID      int
	Command  string
	RSSBytes uint64
	// Source is "kernel" or "guard".
	Source string
	At     time.Time
}

// ExitReporter is a host that reports a running sandbox whose container
// ended without the host ending it (its init or its runtime's sandbox
// process exited, was killed, or crashed). A sandbox the host stops,
// deletes or ends for memory (an OOMEvent of scope sandbox) is not
// reported. It watches what WatchOOM watches.
type ExitReporter interface {
	// Exits delivers the sandboxes' ids, as their containers end.
	Exits() <-chan string
}
