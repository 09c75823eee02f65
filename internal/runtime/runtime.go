// Package runtime is the contract between Platinum's host layer and the OCI
// runtimes that isolate sandboxes (runc today, runsc for the gvisor class).
// One implementation lives in each subpackage; runtimetest is the
// conformance suite every implementation must pass.
package runtime

import (
	"context"
	"errors"
	"syscall"
)

// ErrNotFound is returned when no container with the given ID exists.
var ErrNotFound = errors.New("container not found")

// Resources are a sandbox's hard limits.
type Resources struct {
	// CPU is the number of cores as a CFS quota (1.5 = 150 ms per 100 ms).
	CPU float64
	// MemoryBytes limits memory and memory+swap to the same value, so a
	// sandbox never swaps past its size.
	MemoryBytes int64
	// Pids limits the number of tasks (fork bombs stop here).
	Pids int64
	// CPUs, when set, is the cpuset the sandbox may run on (e.g. "0-1"):
	// it makes nproc inside show the sandbox's size, not the host's.
	CPUs string
}

// Mount is an extra bind mount into the container.
type Mount struct {
	Source      string
	Destination string
	ReadOnly    bool
}

// Spec describes one container to run.
type Spec struct {
	// ID is the container ID (the sandbox ID).
	ID string
	// BundleDir is a host directory the runtime may use for config.json and
	// state; it must exist.
	BundleDir string
	// RootFS is the absolute path of the mounted root filesystem.
	RootFS string
	// Hostname is set in the container's UTS namespace.
	Hostname string
	// NetNSPath joins an existing network namespace (e.g. /run/netns/x);
	// empty means a fresh, empty one.
	NetNSPath string
	// CgroupPath is the cgroup path relative to the hierarchy root, e.g.
	// "/platinum/sbx_…". Always explicit: runc otherwise nests the memory
	// cgroup under the caller's.
	CgroupPath string
	Resources  Resources
	// Args, Env and Cwd describe the init process (pt-agent).
	Args []string
	Env  []string
	Cwd  string
	// Mounts are extra bind mounts (e.g. the read-only agent binary).
	Mounts []Mount
	// CDIDevices are qualified Container Device Interface names (e.g.
	// "nvidia.com/gpu=0") whose edits from the host's CDI specs the
	// container gets: device nodes, mounts, hooks, env (GPUs).
	CDIDevices []string
}

// Status is a container's runtime status.
type Status string

// Container statuses as OCI runtimes report them.
const (
	StatusCreated Status = "created"
	StatusRunning Status = "running"
	StatusPaused  Status = "paused"
	StatusStopped Status = "stopped"
)

// State is what the runtime knows about one container.
type State struct {
	ID     string
	Status Status
	// Pid is the init process's host PID (0 when stopped).
	Pid int
}

// Stats are live resource figures from the container's cgroup.
type Stats struct {
	CPUUsageNanos    uint64
	MemoryUsageBytes uint64
	MemoryLimitBytes uint64
	Pids             uint64
}

// Runtime runs and controls containers. Implementations must be safe for
// concurrent use on different IDs.
type Runtime interface {
	// Name is the runtime class, e.g. "runc".
	Name() string
	// Run creates and starts the container detached, with stdio on
	// /dev/null. It returns once the init process has been started.
	Run(ctx context.Context, spec Spec) error
	// State returns ErrNotFound if the container does not exist.
	State(ctx context.Context, id string) (State, error)
	// List returns every container this runtime instance manages.
	List(ctx context.Context) ([]State, error)
	// Kill sends sig to the init process; ErrNotFound if absent.
	Kill(ctx context.Context, id string, sig syscall.Signal) error
	// Delete stops (SIGKILL) and removes the container and its cgroup. It is
	// idempotent: deleting an absent container returns nil.
	Delete(ctx context.Context, id string) error
	// Update changes limits of a running container in place.
	Update(ctx context.Context, id string, r Resources) error
	// Pause freezes every process of the container; Resume thaws them.
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	// Stats reads the container's cgroup counters.
	Stats(ctx context.Context, id string) (Stats, error)
}
