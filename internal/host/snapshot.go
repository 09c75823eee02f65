package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/platinum-dev/platinum/internal/host/disk"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/oci"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

var (
	_ hostapi.Snapshotter        = (*Host)(nil)
	_ hostapi.CheckpointImporter = (*Host)(nil)
)

// snapshotDir holds a snapshot's memory image; its disk image lives in
// the disk pool under the snapshot's ID, so clones are reflinks too.
func (h *Host) snapshotDir(snapID string) string {
	return filepath.Join(h.cfg.DataDir, "snapshots", snapID)
}

// MemorySnapshots implements hostapi.Snapshotter: a class can snapshot
// memory when its runtime checkpoints on this host (runsc; runc only with
// CRIU >= 4.1).
func (h *Host) MemorySnapshots(class string) (bool, string) {
	rt, ok := h.rts[class]
	if !ok {
		return false, fmt.Sprintf("runtime class %s is not installed on this host", class)
	}
	return oci.Supports(rt)
}

// privileged is the runtime's ability to exec a command with extra
// capabilities (oci.Runtime has it).
type privileged interface {
	ExecPrivileged(ctx context.Context, id string, caps []string, args ...string) ([]byte, error)
}

// Snapshot implements hostapi.Snapshotter. With memory the processes
// are checkpointed first while they keep running (runsc checkpoint
// --leave-running pauses them only for the save), then the disk is copied:
// its filesystem is frozen (FIFREEZE flushes it and holds writers) for the
// reflink copy of its image, milliseconds. The disk copy may be a little
// ahead of the memory image, never behind it: restored processes never
// miss a write they made. A stopped sandbox's disk is copied as it is;
// with memory, the image its stop wrote (checkpoint.go) is linked into the
// snapshot, and MemoryImage is empty when its stop kept none.
func (h *Host) Snapshot(ctx context.Context, id, snapID, class string, memory bool) (hostapi.SnapshotFiles, error) {
	if err := checkID(id); err != nil {
		return hostapi.SnapshotFiles{}, err
	}
	var files hostapi.SnapshotFiles
	// A retry after a crash starts over.
	if err := h.RemoveSnapshot(ctx, snapID); err != nil {
		return files, err
	}
	// The caller names the class: asking each runtime would cost a runtime
	// call per class. A running sandbox has its disk mounted.
	rt, ok := h.rts[class]
	if !ok {
		rt = h.runtimeOf(ctx, id)
	}
	running := isMounted(h.paths(id).diskMnt)
	if memory && (!running || h.Frozen(ctx, id)) {
		// A stopped sandbox's memory is the image its stop wrote, if any
		// (none when its stop froze it in RAM: its disk stays mounted).
		img, err := h.linkStopImage(id, snapID)
		if err != nil {
			h.RemoveSnapshot(context.WithoutCancel(ctx), snapID)
			return hostapi.SnapshotFiles{}, fmt.Errorf("host: snapshot %s: %w", id, err)
		}
		files.MemoryImage = img
	} else if memory {
		cp, ok := rt.(runtime.Checkpointer)
		if !ok {
			return files, fmt.Errorf("host: snapshot %s: memory needs a running sandbox of a class that checkpoints: %w", id, sandbox.ErrConflict)
		}
		files.MemoryImage = filepath.Join(h.snapshotDir(snapID), "memory")
		t0 := time.Now()
		// Established connections in the image leave restored copies with a
		// dead network stack (see resetConnections): end them first.
		if ep, ok := h.net.Endpoint(id); ok {
			h.resetConnections(ep.Addr)
		}
		if err := cp.Checkpoint(ctx, id, files.MemoryImage, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
			h.RemoveSnapshot(context.WithoutCancel(ctx), snapID)
			return hostapi.SnapshotFiles{}, fmt.Errorf("host: snapshot %s: %w", id, err)
		}
		h.log.DebugContext(ctx, "memory checkpointed", "sandbox", id, "snapshot", snapID, "took", time.Since(t0))
	} else if running && rt.Name() == ClassGVisor {
		// gVisor caches file data in its own kernel: flush it to the
		// host files first (best effort; a failure still gives a
		// crash-consistent copy).
		if p, ok := rt.(privileged); ok {
			if _, err := p.ExecPrivileged(ctx, id, nil, agentPath, "sync"); err != nil {
				h.log.WarnContext(ctx, "sync before snapshot", "sandbox", id, "err", err)
			}
		}
	}
	if err := h.copyDisk(ctx, id, snapID); err != nil {
		h.RemoveSnapshot(context.WithoutCancel(ctx), snapID)
		return hostapi.SnapshotFiles{}, err
	}
	files.DiskImage = h.pool.ImagePath(snapID)
	if fi, err := os.Stat(files.DiskImage); err == nil {
		files.SizeBytes = fi.Size()
	}
	if files.MemoryImage != "" {
		files.SizeBytes += dirSize(files.MemoryImage)
	}
	return files, nil
}

// copyDisk reflink-copies the sandbox's disk image to image snapID,
// freezing its filesystem for the copy when it is mounted.
func (h *Host) copyDisk(ctx context.Context, id, snapID string) error {
	mnt := h.paths(id).diskMnt
	if isMounted(mnt) {
		t0 := time.Now()
		if err := disk.Freeze(ctx, mnt); err != nil {
			return fmt.Errorf("host: snapshot %s: %w", id, err)
		}
		err := h.pool.CloneImage(ctx, id, snapID)
		if terr := disk.Thaw(context.WithoutCancel(ctx), mnt); terr != nil && err == nil {
			err = terr
		}
		if err != nil {
			return fmt.Errorf("host: snapshot %s: %w", id, err)
		}
		h.log.DebugContext(ctx, "disk snapshot", "sandbox", id, "snapshot", snapID, "frozen", time.Since(t0))
		return nil
	}
	if err := h.pool.CloneImage(ctx, id, snapID); err != nil {
		return fmt.Errorf("host: snapshot %s: %w", id, err)
	}
	return nil
}

// RemoveSnapshot implements hostapi.Snapshotter. It is idempotent.
func (h *Host) RemoveSnapshot(ctx context.Context, snapID string) error {
	if err := h.pool.RemoveImage(ctx, snapID); err != nil {
		return fmt.Errorf("host: remove snapshot: %w", err)
	}
	if err := os.RemoveAll(h.snapshotDir(snapID)); err != nil {
		return fmt.Errorf("host: remove snapshot: %w", err)
	}
	return nil
}

// RestoreDisk implements hostapi.Snapshotter: it stops the sandbox
// disk-only (dropping any memory it kept) and replaces its disk image with
// a reflink copy of the snapshot's in one rename, so a crash leaves the old
// disk or the snapshot's, never a mix; calling it again finishes the job.
func (h *Host) RestoreDisk(ctx context.Context, id, snapID string) error {
	if _, err := h.Stop(ctx, id, false); err != nil {
		return err
	}
	if err := h.pool.ReplaceImage(ctx, snapID, id); err != nil {
		return fmt.Errorf("host: restore %s: %w", id, err)
	}
	return nil
}

// prepareClone gives a sandbox started from a snapshot its copy of the
// snapshot's disk, unless it has a disk already (a retried start). A copy
// that will boot cold gets its identity files written on the disk before
// it boots (hostname, hosts, a fresh machine-id): that saves a runtime
// exec per copy, and a cold boot has fresh kernel entropy anyway.
func (h *Host) prepareClone(ctx context.Context, spec hostapi.StartSpec) error {
	c := spec.Clone
	if c == nil {
		return nil
	}
	if c.SnapshotID != "" {
		if _, err := os.Stat(h.pool.ImagePath(spec.ID)); err != nil {
			if err := h.pool.CloneImage(ctx, c.SnapshotID, spec.ID); err != nil && !errors.Is(err, sandbox.ErrAlreadyExists) {
				return fmt.Errorf("host: clone of %s: %w", c.SnapshotID, err)
			}
		}
	}
	if !c.NewIdentity || c.MemoryImage != "" || h.identityDone(spec.ID) {
		return nil
	}
	p := h.paths(spec.ID)
	if err := os.MkdirAll(p.diskMnt, 0o700); err != nil {
		return fmt.Errorf("host: clone: %w", err)
	}
	if err := h.pool.MountImage(ctx, spec.ID, p.diskMnt); err != nil {
		return fmt.Errorf("host: clone: %w", err)
	}
	etc := filepath.Join(p.upper, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return fmt.Errorf("host: clone identity: %w", err)
	}
	mid := make([]byte, 16)
	rand.Read(mid)
	for name, content := range map[string]string{
		"hostname":   spec.ID + "\n",
		"hosts":      "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + spec.ID + "\n",
		"machine-id": hex.EncodeToString(mid) + "\n",
	} {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("host: clone identity: %w", err)
		}
	}
	return h.markIdentity(spec.ID)
}

// identityMark records in the sandbox's directory that the copy has its
// own identity, so a retried start never gives it another.
const identityMark = "identity"

func (h *Host) identityDone(id string) bool {
	_, err := os.Stat(filepath.Join(h.paths(id).dir, identityMark))
	return err == nil
}

func (h *Host) markIdentity(id string) error {
	if err := os.WriteFile(filepath.Join(h.paths(id).dir, identityMark), nil, 0o600); err != nil {
		return fmt.Errorf("host: clone identity: %w", err)
	}
	return nil
}

// restoreClone starts the container from a snapshot's memory image, under
// the sandbox's own ID, paths and network namespace (gVisor takes the new
// namespace's address). When the image cannot be used the sandbox boots
// cold on its disk copy and failure says why.
func (h *Host) restoreClone(ctx context.Context, rt runtime.Runtime, rspec runtime.Spec, image string) (restored bool, failure string, err error) {
	cp, ok := rt.(runtime.Checkpointer)
	if ok {
		t0 := time.Now()
		rerr := cp.Restore(ctx, rspec, image)
		if rerr == nil {
			h.log.DebugContext(ctx, "sandbox restored from snapshot", "sandbox", rspec.ID, "took", time.Since(t0))
			return true, "", nil
		}
		if ctx.Err() != nil || errors.Is(rerr, sandbox.ErrAlreadyExists) {
			return false, "", fmt.Errorf("host: restore: %w", rerr)
		}
		failure = "memory restore failed: " + rerr.Error()
	} else {
		_, why := oci.Supports(rt)
		failure = "runtime class " + rt.Name() + " cannot restore memory on this host: " + why
	}
	h.log.WarnContext(ctx, "snapshot memory not restored; booting from its disk", "sandbox", rspec.ID, "reason", failure)
	if err := rt.Run(ctx, rspec); err != nil {
		return false, failure, fmt.Errorf("host: runtime: %w", err)
	}
	return false, failure, nil
}

// finishClone runs once a copy's agent answers: a copy restored from
// another sandbox's memory gets its own agent token, and waits for its new
// identity (startIdentity), recorded once it is done.
func (h *Host) finishClone(ctx context.Context, spec hostapi.StartSpec, inst hostapi.Instance, identity <-chan error) error {
	c := spec.Clone
	if c != nil && c.SourceAgentToken != "" && c.SourceAgentToken != spec.AgentToken {
		// Re-key with the source's token; a retried start finds it done.
		err := h.agentClient(inst.Address, c.SourceAgentToken).SetAccessToken(ctx, spec.AgentToken)
		if err != nil && h.agentClient(inst.Address, spec.AgentToken).SetAccessToken(ctx, spec.AgentToken) != nil {
			<-identity
			return fmt.Errorf("host: clone agent token: %w", err)
		}
	}
	if err := <-identity; err != nil {
		return err
	}
	if !identityNeeded(h, spec, inst) {
		return nil
	}
	return h.markIdentity(spec.ID)
}

// identityNeeded reports whether a copy still has the source's identity:
// restored from memory (hostname and entropy live in its kernel) or not
// yet given its own on disk (prepareClone).
func identityNeeded(h *Host, spec hostapi.StartSpec, inst hostapi.Instance) bool {
	c := spec.Clone
	return c != nil && c.NewIdentity && !(h.identityDone(spec.ID) && !inst.MemoryRestored)
}

// startIdentity gives a copy that needs it its own identity through
// `pt-agent identity` run with CAP_SYS_ADMIN (hostname, machine-id,
// entropy), in the background. The channel receives the result once (nil
// at once when there is nothing to do).
func (h *Host) startIdentity(ctx context.Context, spec hostapi.StartSpec, inst hostapi.Instance) <-chan error {
	done := make(chan error, 1)
	if !identityNeeded(h, spec, inst) {
		done <- nil
		return done
	}
	rt := h.runtimeOf(ctx, spec.ID)
	p, ok := rt.(privileged)
	if !ok {
		done <- fmt.Errorf("host: runtime %s cannot exec: %w", rt.Name(), sandbox.ErrUnavailable)
		return done
	}
	go func() {
		if out, err := p.ExecPrivileged(ctx, spec.ID, []string{"CAP_SYS_ADMIN"}, agentPath, "identity", spec.ID); err != nil {
			done <- fmt.Errorf("host: clone identity: %w (%s)", err, out)
			return
		}
		done <- nil
	}()
	return done
}
