package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// CheckpointRuntime is a Runtime whose binary can checkpoint and restore
// on this host: runsc, or runc with a working CRIU >= 4.1. It implements
// runtime.Checkpointer; a plain *Runtime does not, so a type assertion on
// what NewRuntime returns tells the truth.
type CheckpointRuntime struct {
	*Runtime
}

var _ runtime.Checkpointer = (*CheckpointRuntime)(nil)

// NewRuntime is New, returning a *CheckpointRuntime when the binary can
// checkpoint on this host and the plain *Runtime otherwise. It returns the
// interface rather than a concrete type on purpose: callers discover the
// ability with a type assertion (or Supports), as with any optional
// runtime ability.
func NewRuntime(cfg Config, logger *slog.Logger) (runtime.Runtime, error) {
	r, err := New(cfg, logger)
	if err != nil {
		return nil, err
	}
	if r.noCheckpoint == nil {
		return &CheckpointRuntime{Runtime: r}, nil
	}
	r.logger.Info("checkpoints unavailable", "reason", r.noCheckpoint)
	return r, nil
}

// Supports reports whether rt can checkpoint and restore and, when it
// cannot, why (for the host info endpoint and logs).
func Supports(rt runtime.Runtime) (checkpoint bool, reason string) {
	switch v := rt.(type) {
	case runtime.Checkpointer:
		return true, ""
	case *Runtime:
		if v.noCheckpoint == nil {
			return false, "created with New: use NewRuntime for checkpoints"
		}
		return false, v.noCheckpoint.Error()
	default:
		return false, fmt.Sprintf("runtime %s does not implement checkpoints", rt.Name())
	}
}

// Checkpoint saves the running container id into imageDir (see
// runtime.Checkpointer). Without LeaveRunning the container is then
// deleted, as Delete does (for runsc that also gives its network
// namespace its addresses back).
func (c *CheckpointRuntime) Checkpoint(ctx context.Context, id, imageDir string, opts runtime.CheckpointOptions) error {
	if err := makeImageDir(imageDir); err != nil {
		return fmt.Errorf("checkpoint %s: %w", id, err)
	}
	st, err := c.State(ctx, id)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", id, err)
	}
	if st.Status != runtime.StatusRunning {
		return fmt.Errorf("checkpoint %s: container is %s: %w", id, st.Status, sandbox.ErrConflict)
	}
	args := []string{"checkpoint", "--image-path", imageDir}
	if opts.LeaveRunning {
		args = append(args, "--leave-running")
	}
	args = append(args, c.checkpointFlags()...)
	if !opts.LeaveRunning {
		c.unwatchExit(id) // the checkpoint ends it
	}
	t0 := time.Now()
	if _, err := c.run(ctx, append(args, id)...); err != nil {
		c.watchExit(id) // if it still runs
		return fmt.Errorf("checkpoint %s: %w", id, err)
	}
	saved := time.Since(t0)
	// Once the cgroup is empty (runsc) nothing is left to kill.
	emptied := false
	if !opts.LeaveRunning && c.gvisor {
		if b := c.bundleOf(ctx, id); b != "" {
			emptied = killCgroupAndWait(ctx, b, 5*time.Second)
		}
	}
	reaped := time.Since(t0)
	if !opts.LeaveRunning {
		// runsc leaves the container stopped, runc removes it: make both
		// free the ID (and, for runsc, the namespace's addresses).
		if err := c.delete(context.WithoutCancel(ctx), id, !emptied); err != nil {
			return fmt.Errorf("checkpoint %s: saved, but %w", id, err)
		}
	}
	c.logger.DebugContext(ctx, "container checkpointed", "container", id, "leave_running", opts.LeaveRunning,
		"save", saved, "reap", reaped-saved, "total", time.Since(t0))
	return nil
}

// Restore starts spec's container from the image in imageDir (see
// runtime.Checkpointer), with the bundle's config.json rewritten from spec.
func (c *CheckpointRuntime) Restore(ctx context.Context, spec runtime.Spec, imageDir string) error {
	if err := checkImageDir(imageDir); err != nil {
		return fmt.Errorf("restore %s: %w", spec.ID, err)
	}
	// Checked before WriteConfig so a taken ID's bundle is left alone.
	if _, err := c.State(ctx, spec.ID); err == nil {
		return fmt.Errorf("restore %s: container exists: %w", spec.ID, sandbox.ErrAlreadyExists)
	} else if !errors.Is(err, runtime.ErrNotFound) {
		return fmt.Errorf("restore %s: %w", spec.ID, err)
	}
	if err := c.WriteConfig(spec); err != nil {
		return fmt.Errorf("restore %s: %w", spec.ID, err)
	}
	logPath := filepath.Join(spec.BundleDir, logFile)
	if err := os.WriteFile(logPath, nil, 0o600); err != nil {
		return fmt.Errorf("restore %s: %w", spec.ID, err)
	}
	sub := []string{"restore", "--image-path", imageDir, "--detach", "--bundle", spec.BundleDir}
	sub = append(sub, c.restoreFlags()...)
	args := c.args(logPath, c.containerFlags(spec), append(sub, spec.ID)...)
	if err := c.start(ctx, spec, logPath, args); err != nil {
		if !errors.Is(err, sandbox.ErrAlreadyExists) {
			// Leave nothing behind under the ID (a half-restored sandbox).
			if derr := c.Delete(context.WithoutCancel(ctx), spec.ID); derr != nil {
				c.logger.WarnContext(ctx, "restore: cleanup", "container", spec.ID, "err", derr)
			}
		}
		return fmt.Errorf("restore %s: %w", spec.ID, err)
	}
	return c.started(ctx, spec, "restore", "container restored")
}

// checkpointFlags are the checkpoint subcommand's flags besides the image
// and --leave-running.
func (c *CheckpointRuntime) checkpointFlags() []string {
	if c.gvisor {
		return runscCheckpointFlags
	}
	return criuFlags
}

func (c *CheckpointRuntime) restoreFlags() []string {
	if c.gvisor {
		return nil
	}
	return criuFlags
}

// runscCheckpointFlags: runsc compresses images by default (flate), which
// costs far more CPU than the disk space it saves for sandbox memory.
var runscCheckpointFlags = []string{"--compression=none"}

// criuFlags: the host keeps HTTP connections to pt-agent open, and CRIU
// refuses to dump established TCP connections unless told to.
var criuFlags = []string{"--tcp-established"}

// makeImageDir creates imageDir if missing and refuses one that holds
// files: a second image in the same place would mix with the first.
func makeImageDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("image dir %q is not absolute: %w", dir, sandbox.ErrInvalidArgument)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("image dir: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("image dir: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("image dir %s is not empty: %w", dir, sandbox.ErrAlreadyExists)
	}
	return nil
}

// checkImageDir refuses an imageDir that does not exist or is empty.
func checkImageDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("image dir %q is not absolute: %w", dir, sandbox.ErrInvalidArgument)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0 {
		return fmt.Errorf("no checkpoint image in %s: %w", dir, sandbox.ErrInvalidArgument)
	}
	if err != nil {
		return fmt.Errorf("image dir: %w", err)
	}
	return nil
}

// minCRIU is the oldest CRIU that dumps on the kernels we run: 3.17
// (Debian 12) fails on 6.x kernels' vDSO layout ([vvar_vclock]).
var minCRIU = [2]int{4, 1}

// criuSupport returns why runc cannot checkpoint here, or nil: CRIU must
// be installed, at least minCRIU, and pass `criu check`.
func criuSupport(ctx context.Context) error {
	bin, err := exec.LookPath("criu")
	if err != nil {
		return errors.New("criu is not installed (runc checkpoints need CRIU >= 4.1)")
	}
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return fmt.Errorf("criu --version: %w", err)
	}
	v, ok := criuVersion(out)
	if !ok {
		return fmt.Errorf("criu --version: cannot parse %q", strings.TrimSpace(string(out)))
	}
	if v[0] < minCRIU[0] || v[0] == minCRIU[0] && v[1] < minCRIU[1] {
		return fmt.Errorf("criu %d.%d is older than %d.%d, which runc checkpoints need on this kernel", v[0], v[1], minCRIU[0], minCRIU[1])
	}
	if out, err := exec.CommandContext(ctx, bin, "check").CombinedOutput(); err != nil {
		msg := lastLine(out)
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("criu check: %s", msg)
	}
	return nil
}

// criuVersion parses "Version: 4.1.1" (and "Version: 4.1") from
// `criu --version`.
func criuVersion(out []byte) ([2]int, bool) {
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Version:")
		if !ok {
			continue
		}
		parts := strings.SplitN(strings.TrimSpace(rest), ".", 3)
		if len(parts) < 2 {
			return [2]int{}, false
		}
		major, err1 := strconv.Atoi(parts[0])
		minor, err2 := strconv.Atoi(leadingDigits(parts[1]))
		if err1 != nil || err2 != nil {
			return [2]int{}, false
		}
		return [2]int{major, minor}, true
	}
	return [2]int{}, false
}

func leadingDigits(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		return s
	}
	return s[:i]
}

func lastLine(out []byte) string {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	return string(bytes.TrimSpace(lines[len(lines)-1]))
}
