package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/oci"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Stop with memory has two forms here:
//
//   - freeze (runc without a working CRIU): the cgroup is frozen and the
//     processes stay in RAM, for the control plane's warm window and within
//     its memory budget (Frozen is true);
//   - checkpoint (gvisor always; runc with CRIU >= 4.1 passing `criu
//     check`): memory and process state are written to the sandbox's own
//     directory under the data dir and the container ends, so its RAM is
//     free. The image is on disk: it survives the warm window, a ptd restart
//     and a host reboot, and the next start restores it. It is dropped by a
//     disk-only stop (memory=false, a resize while stopped, an archive) and
//     by Destroy, and after each restore (a new stop writes a new one).
//
// A restore that fails boots the sandbox cold from the same disk and says
// why (Instance.RestoreFailure); it never leaves the sandbox stuck.

// checkpointDirName is the image's directory inside the sandbox's dir;
// checkpointMetaName, written last, is what makes it valid.
const (
	checkpointDirName  = "checkpoint"
	checkpointPartName = "checkpoint.partial"
	checkpointMetaName = "checkpoint.json"
)

// checkpointMeta describes a complete image.
type checkpointMeta struct {
	// Class is the runtime class that wrote it; only that class restores it.
	Class string    `json:"class"`
	At    time.Time `json:"at"`
}

func (h *Host) checkpointDir(id string) string {
	return filepath.Join(h.paths(id).dir, checkpointDirName)
}

// checkpointer returns rt's checkpoint ability on this host, or nil.
func checkpointer(rt runtime.Runtime) runtime.Checkpointer {
	cp, _ := rt.(runtime.Checkpointer)
	return cp
}

// checkpointed returns the metadata of the sandbox's complete checkpoint
// image, if it has one.
func (h *Host) checkpointed(id string) (checkpointMeta, bool) {
	m, ok := h.checkpointMeta(id)
	return m, ok && h.imagePresent(id)
}

// checkpointMeta returns what the last complete checkpoint recorded; the
// image itself may since have gone (see imagePresent).
func (h *Host) checkpointMeta(id string) (checkpointMeta, bool) {
	var m checkpointMeta
	b, err := os.ReadFile(filepath.Join(h.paths(id).dir, checkpointMetaName))
	if err != nil || json.Unmarshal(b, &m) != nil || m.Class == "" {
		return checkpointMeta{}, false
	}
	return m, true
}

func (h *Host) imagePresent(id string) bool {
	entries, err := os.ReadDir(h.checkpointDir(id))
	return err == nil && len(entries) > 0
}

// Checkpointed reports whether a stopped sandbox's memory is saved on disk,
// so its next start restores it. Unlike Frozen, such a sandbox holds no
// RAM: warm windows and budgets do not apply to it.
func (h *Host) Checkpointed(id string) bool {
	_, ok := h.checkpointed(id)
	return ok
}

// removeCheckpoint drops the sandbox's image (complete or partial, and
// any a discardCheckpoint left behind). Idempotent.
func (h *Host) removeCheckpoint(id string) error {
	dir := h.paths(id).dir
	errs := []error{
		ignoreNotExist(os.Remove(filepath.Join(dir, checkpointMetaName))),
		os.RemoveAll(filepath.Join(dir, checkpointDirName)),
		os.RemoveAll(filepath.Join(dir, checkpointPartName)),
	}
	used, _ := filepath.Glob(filepath.Join(dir, checkpointUsedPrefix+"*"))
	for _, u := range used {
		errs = append(errs, os.RemoveAll(u))
	}
	return errors.Join(errs...)
}

// checkpointUsedPrefix names images a restore has consumed, waiting for
// their removal in the background.
const checkpointUsedPrefix = "checkpoint.used-"

// discardCheckpoint drops a restored sandbox's image without making the
// start wait for it: unlinking a 256 MB image takes ~0.3 s here. The
// metadata goes first (the image is then invalid), the directory is
// renamed out of the way of the next stop's image and removed in the
// background; what a crash leaves is removed by the next removeCheckpoint.
func (h *Host) discardCheckpoint(id string) error {
	dir := h.paths(id).dir
	if err := ignoreNotExist(os.Remove(filepath.Join(dir, checkpointMetaName))); err != nil {
		return err
	}
	used := filepath.Join(dir, checkpointUsedPrefix+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Rename(h.checkpointDir(id), used); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return h.removeCheckpoint(id)
	}
	go func() {
		if err := os.RemoveAll(used); err != nil {
			h.log.Warn("remove used checkpoint", "sandbox", id, "err", err)
		}
	}()
	return nil
}

func ignoreNotExist(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// checkpoint saves the running container id with cp and ends it: the image
// goes to a partial directory first and becomes valid only once renamed
// and described, so a crash halfway leaves no image that looks complete.
func (h *Host) checkpoint(ctx context.Context, id, class string, cp runtime.Checkpointer) error {
	if err := h.removeCheckpoint(id); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	dir := h.paths(id).dir
	part := filepath.Join(dir, checkpointPartName)
	t0 := time.Now()
	if ep, ok := h.net.Endpoint(id); ok {
		h.resetConnections(ep.Addr)
	}
	if err := cp.Checkpoint(ctx, id, part, runtime.CheckpointOptions{}); err != nil {
		os.RemoveAll(part)
		return err
	}
	if err := os.Rename(part, h.checkpointDir(id)); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	b, _ := json.Marshal(checkpointMeta{Class: class, At: time.Now().UTC()})
	tmp := filepath.Join(dir, checkpointMetaName+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, checkpointMetaName)); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	h.log.DebugContext(ctx, "sandbox checkpointed", "sandbox", id, "class", class, "took", time.Since(t0))
	return nil
}

// checkpointTimeout bounds a checkpoint. Writing a sandbox's memory takes
// seconds even for many GiB; one that has not finished by then never will
// (runsc 2026-09 deadlocks when an IPv6 packet reaches the sandbox during
// its save, docs/ARCHITECTURE.md "A checkpoint that never ends"), and the stop
// must not wait for it forever.
const checkpointTimeout = 5 * time.Minute

// stopKeepingMemory keeps the sandbox's memory for its next start, by
// checkpoint where its class can and by freezing otherwise. It reports
// false (and the caller stops disk-only) when neither worked.
func (h *Host) stopKeepingMemory(ctx context.Context, id string, rt runtime.Runtime, st runtime.State) bool {
	switch st.Status {
	case runtime.StatusPaused:
		return true
	case runtime.StatusRunning:
	default:
		return false
	}
	if cp := checkpointer(rt); cp != nil {
		cctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
		err := h.checkpoint(cctx, id, rt.Name(), cp)
		cancel()
		if err == nil {
			return true
		}
		if cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			// A wedged Sentry would not pause either: stop from disk,
			// whose delete kills it however it is stuck.
			h.log.WarnContext(ctx, "checkpoint did not finish; stopping disk-only", "sandbox", id, "after", checkpointTimeout)
			return false
		}
		h.log.WarnContext(ctx, "checkpoint failed; freezing instead", "sandbox", id, "err", err)
		if st, err = rt.State(ctx, id); err != nil || st.Status != runtime.StatusRunning {
			return false
		}
	}
	if err := rt.Pause(ctx, id); err != nil {
		h.log.WarnContext(ctx, "freeze failed; stopping disk-only", "sandbox", id, "err", err)
		return false
	}
	return true
}

// restore starts the sandbox's container from its checkpoint image, if it
// has one for class. restored is true when the processes came back; a
// non-empty failure says why an image that was there could not be used
// (the caller then boots cold). err is returned only when the start
// should not go on (cancelled, or a concurrent runtime call holds the ID).
// The image is consumed either way.
func (h *Host) restore(ctx context.Context, rt runtime.Runtime, rspec runtime.Spec) (restored bool, failure string, err error) {
	m, ok := h.checkpointMeta(rspec.ID)
	if !ok {
		return false, "", nil
	}
	cp := checkpointer(rt)
	switch {
	case !h.imagePresent(rspec.ID):
		failure = "the memory image written at stop is missing"
	case m.Class != rt.Name():
		failure = fmt.Sprintf("the memory image was written by runtime class %s, the sandbox runs %s", m.Class, rt.Name())
	case cp == nil:
		_, why := oci.Supports(rt)
		failure = "runtime class " + rt.Name() + " cannot restore memory on this host: " + why
	default:
		t0 := time.Now()
		rerr := cp.Restore(ctx, rspec, h.checkpointDir(rspec.ID))
		if rerr == nil {
			h.log.DebugContext(ctx, "sandbox restored", "sandbox", rspec.ID, "took", time.Since(t0))
			if err := h.discardCheckpoint(rspec.ID); err != nil {
				h.log.WarnContext(ctx, "remove used checkpoint", "sandbox", rspec.ID, "err", err)
			}
			return true, "", nil
		}
		if ctx.Err() != nil || errors.Is(rerr, sandbox.ErrAlreadyExists) {
			return false, "", fmt.Errorf("host: restore: %w", rerr)
		}
		failure = "memory restore failed: " + rerr.Error()
	}
	h.log.WarnContext(ctx, "memory not restored; booting from disk", "sandbox", rspec.ID, "reason", failure)
	if err := h.removeCheckpoint(rspec.ID); err != nil {
		return false, "", fmt.Errorf("host: restore: %w", err)
	}
	return false, failure, nil
}

// addressFile keeps the sandbox's address in its directory: a running
// gVisor sandbox owns its namespace's addresses, so after a ptd restart
// the network layer cannot read it back (see adoptEndpoints).
const addressFile = "address"

func (h *Host) writeAddress(id string, addr netip.Addr) error {
	path := filepath.Join(h.paths(id).dir, addressFile)
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == addr.String() {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr.String()+"\n"), 0o600); err != nil {
		return fmt.Errorf("host: address: %w", err)
	}
	return os.Rename(tmp, path)
}

// adoptEndpoints registers, after a restart, the network endpoints that
// network.Recover could not see (running gVisor sandboxes), from the
// address each sandbox's directory records. Run before any Attach.
func (h *Host) adoptEndpoints(ctx context.Context) {
	entries, _ := os.ReadDir(filepath.Join(h.cfg.DataDir, "sandboxes"))
	for _, e := range entries {
		id := e.Name()
		if _, ok := h.net.Endpoint(id); ok || !sandbox.ValidID(sandbox.PrefixSandbox, id) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(h.paths(id).dir, addressFile))
		if err != nil {
			continue
		}
		addr, err := netip.ParseAddr(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		if _, err := h.net.Adopt(ctx, id, addr); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			h.log.WarnContext(ctx, "adopt network endpoint", "sandbox", id, "err", err)
		}
	}
}

// resetConnections ends every TCP connection between this host and the
// sandbox at addr before a checkpoint: keep-alive connections to pt-agent
// (ours and the control plane's) would otherwise be saved established, and
// gVisor (runsc 2024-07, even with --net-disconnect-ok) restores such a
// sandbox with a network stack that no longer answers. Destroying the
// host's end sends the sandbox a reset, which it handles before it is
// saved; clients reconnect after the start.
func (h *Host) resetConnections(addr netip.Addr) {
	h.hc.CloseIdleConnections()
	socks, err := netlink.SocketDiagTCP(unix.AF_INET)
	if err != nil {
		h.log.Warn("list connections to a sandbox", "addr", addr, "err", err)
		return
	}
	ip := net.IP(addr.AsSlice())
	n := 0
	for _, s := range socks {
		if !s.ID.Destination.Equal(ip) {
			continue
		}
		local := &net.TCPAddr{IP: s.ID.Source, Port: int(s.ID.SourcePort)}
		remote := &net.TCPAddr{IP: s.ID.Destination, Port: int(s.ID.DestinationPort)}
		if err := netlink.SocketDestroy(local, remote); err != nil {
			h.log.Warn("reset a connection to a sandbox", "addr", addr, "err", err)
			continue
		}
		n++
	}
	if n > 0 {
		// The resets cross the veth at once; let the sandbox's network
		// stack take them in before it is paused.
		time.Sleep(20 * time.Millisecond)
	}
}

// ClassWorks reports whether runtime class runs sandboxes on this host: it
// is installed and (for gvisor) a throwaway sandbox runs. ptd uses it to
// pick the default class.
func (h *Host) ClassWorks(ctx context.Context, class string) error {
	rt, ok := h.rts[class]
	if !ok {
		return fmt.Errorf("runtime class %s is not installed: %w", class, sandbox.ErrUnavailable)
	}
	// *oci.Runtime, and *oci.CheckpointRuntime which embeds it, probe.
	if p, ok := rt.(interface{ Probe(context.Context) error }); ok {
		return p.Probe(ctx)
	}
	return nil
}

// linkStopImage links the complete checkpoint image a stopped sandbox's
// stop wrote into snapshot snapID's directory (hard links: runsc never
// writes into an image it has written, and a restore here only renames
// and removes the sandbox's own names), and returns its path; "" when
// the sandbox has no complete image. Its class goes with it, in a
// checkpoint.json beside the files.
func (h *Host) linkStopImage(id, snapID string) (string, error) {
	m, ok := h.checkpointed(id)
	if !ok {
		return "", nil
	}
	src := h.checkpointDir(id)
	dst := filepath.Join(h.snapshotDir(snapID), "memory")
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return "", fmt.Errorf("checkpoint image %s holds %s, not a regular file", src, e.Name())
		}
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if err := os.Link(from, to); err != nil {
			if err := copyFile(from, to); err != nil {
				return "", err
			}
		}
	}
	// Checked again once linked: a start that consumed the image meanwhile
	// (it renames the directory away first) leaves no complete image.
	if m2, ok := h.checkpointed(id); !ok || !m2.At.Equal(m.At) || m2.Class != m.Class {
		os.RemoveAll(dst)
		return "", nil
	}
	return dst, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ImportCheckpoint implements hostapi.CheckpointImporter: fill writes a
// checkpoint image of class (another host's stop, from the object store)
// into a partial directory, which becomes the sandbox's image the way a
// stop here makes one (renamed, then described), so a crash or a failed
// fill leaves no image that looks complete. The sandbox's next start
// restores it, or boots cold and says why.
func (h *Host) ImportCheckpoint(ctx context.Context, id, class string, fill func(ctx context.Context, dir string) error) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := h.removeCheckpoint(id); err != nil {
		return fmt.Errorf("host: import checkpoint: %w", err)
	}
	dir := h.paths(id).dir
	part := filepath.Join(dir, checkpointPartName)
	if err := os.MkdirAll(part, 0o700); err != nil {
		return fmt.Errorf("host: import checkpoint: %w", err)
	}
	if err := fill(ctx, part); err != nil {
		os.RemoveAll(part)
		return fmt.Errorf("host: import checkpoint: %w", err)
	}
	if err := os.Rename(part, h.checkpointDir(id)); err != nil {
		return fmt.Errorf("host: import checkpoint: %w", err)
	}
	b, _ := json.Marshal(checkpointMeta{Class: class, At: time.Now().UTC()})
	tmp := filepath.Join(dir, checkpointMetaName+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("host: import checkpoint: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, checkpointMetaName)); err != nil {
		return fmt.Errorf("host: import checkpoint: %w", err)
	}
	return nil
}
