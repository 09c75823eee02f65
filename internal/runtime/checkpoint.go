package runtime

import "context"

// CheckpointOptions tune one Checkpoint.
type CheckpointOptions struct {
	// LeaveRunning keeps the container running once its state is saved
	// (snapshots and forks of a running sandbox). Without it the container
	// is stopped and deleted after the save, which frees its memory and its
	// ID, so Restore can bring it back under the same ID (stop with memory).
	LeaveRunning bool
}

// Checkpointer is the optional ability to save a running container's
// memory and process state to a directory and to start a container from
// such an image later, with its processes continuing where they were. Find
// it with a type assertion on a Runtime: only runtimes that can do it on
// this host implement it (runsc always; runc only with a working CRIU), so
// the assertion is the capability check.
//
// The image holds memory and process state only. The root filesystem,
// bind-mount sources and the network namespace are the caller's: Restore
// expects them to be back in place, unchanged since the checkpoint (same
// paths for the same ID; the disk may be a copy for another ID).
type Checkpointer interface {
	// Checkpoint saves container id into imageDir, which it creates if
	// missing. It returns an error wrapping ErrNotFound if the container
	// does not exist, sandbox.ErrConflict if it is not running,
	// sandbox.ErrAlreadyExists if imageDir already holds files, and
	// sandbox.ErrUnavailable when the runtime fails to save it. After a
	// failed Checkpoint the container may be running or stopped: check
	// State.
	Checkpoint(ctx context.Context, id, imageDir string, opts CheckpointOptions) error
	// Restore starts spec's container from the image in imageDir, detached
	// with stdio on /dev/null like Run, and returns once it runs. spec is
	// what Run was given (its ID may differ, e.g. for a fork). It returns an
	// error wrapping sandbox.ErrAlreadyExists if the ID is taken,
	// sandbox.ErrInvalidArgument for a bad Spec or an imageDir without an
	// image, and sandbox.ErrUnavailable when the runtime cannot restore it;
	// on error no container is left behind under spec.ID.
	Restore(ctx context.Context, spec Spec, imageDir string) error
}
