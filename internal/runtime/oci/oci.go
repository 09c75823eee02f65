// Package oci implements runtime.Runtime by driving an OCI runtime binary:
// runc for the runc class, runsc (gVisor) for the gvisor class, with the
// same code (GVisorConfig gives runsc's flags; see gvisor.go for where the
// two differ). It writes the bundle's config.json with Platinum's isolation
// defaults (namespaces, cgroup limits, dropped capabilities, masked /proc
// paths, our own seccomp profile) and shells out for every operation, as
// containerd's runc shim does: the binaries are Debian packages, not our
// code. Checkpoint and restore (runtime.Checkpointer) are in checkpoint.go.
package oci

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Config configures a Runtime.
type Config struct {
	// Binary is the OCI runtime executable, a name on PATH or a path.
	Binary string
	// Root is the runtime's state directory (--root). Each ptd data dir
	// (and each test) uses its own, so List never sees other containers.
	Root string
	// Class is the runtime class name Name returns ("runc", "gvisor").
	Class string
	// GlobalArgs are extra flags placed before the subcommand, e.g.
	// ["--platform=systrap"] for runsc.
	GlobalArgs []string
	// CDISpecDirs are where the CDI specs of Spec.CDIDevices are read;
	// nil means DefaultCDISpecDirs.
	CDISpecDirs []string
}

// DefaultConfig returns a runc configuration; Root must still be set.
func DefaultConfig() Config {
	return Config{Binary: "runc", Class: "runc"}
}

// ConfigError reports an invalid Config field.
type ConfigError struct {
	Field string
	Err   error
}

func (e *ConfigError) Error() string { return "oci config " + e.Field + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// Validate checks that every field is usable.
func (c Config) Validate() error {
	switch {
	case c.Binary == "":
		return &ConfigError{Field: "Binary", Err: errors.New("empty")}
	case !filepath.IsAbs(c.Root):
		return &ConfigError{Field: "Root", Err: fmt.Errorf("%q is not absolute", c.Root)}
	case c.Class == "":
		return &ConfigError{Field: "Class", Err: errors.New("empty")}
	}
	return nil
}

// Runtime drives one OCI runtime binary with one state directory. It is
// safe for concurrent use: every call is a separate process and the
// runtime binary locks per container.
//
// A Runtime does not implement runtime.Checkpointer; NewRuntime returns a
// CheckpointRuntime instead when the binary can checkpoint on this host.
type Runtime struct {
	cfg    Config
	binary string
	logger *slog.Logger
	pl     platform
	// gvisor is set when the binary is runsc (detected from --version).
	gvisor bool
	// noCheckpoint says why this host cannot checkpoint with the binary;
	// nil when it can.
	noCheckpoint error
	// oom watches running containers' memory cgroups (oom.go), exits
	// their processes' ends (exit.go).
	oom   oomWatches
	exits exitWatches
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns a Runtime for cfg; empty Binary and Class default to runc.
// It fails if the binary is not installed or Root cannot be created. It
// runs the binary's --version once to tell runc from runsc and, for runc,
// probes CRIU once (see CheckpointRuntime); for runsc it lists its flags
// once (runscVersionArgs).
func New(cfg Config, logger *slog.Logger) (*Runtime, error) {
	def := DefaultConfig()
	if cfg.Binary == "" {
		cfg.Binary = def.Binary
	}
	if cfg.Class == "" {
		cfg.Class = def.Class
	}
	if cfg.CDISpecDirs == nil {
		cfg.CDISpecDirs = DefaultCDISpecDirs
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath(cfg.Binary)
	if err != nil {
		return nil, &ConfigError{Field: "Binary", Err: err}
	}
	if err := os.MkdirAll(cfg.Root, 0o700); err != nil {
		return nil, &ConfigError{Field: "Root", Err: err}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil, fmt.Errorf("oci: getrlimit: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	version, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return nil, &ConfigError{Field: "Binary", Err: fmt.Errorf("%s --version: %w", bin, err)}
	}
	gvisor := bytes.HasPrefix(bytes.TrimSpace(version), []byte("runsc"))
	if gvisor {
		cfg.GlobalArgs = runscVersionArgs(ctx, bin, cfg.GlobalArgs)
		if first, _, _ := bytes.Cut(version, []byte("\n")); !bytes.Contains(first, []byte(runscPatched)) {
			logger.Warn("runsc is not built with third_party/gvisor's memory limit: a gVisor sandbox whose memory outgrows its host's room is ended as a whole rather than losing one process; scripts/setup.sh builds and installs one that has it",
				"runsc", bin, "version", string(bytes.TrimSpace(first)))
		}
	}
	r := &Runtime{
		cfg:    cfg,
		binary: bin,
		logger: logger.With("runtime", cfg.Class),
		pl: platform{
			goarch:  goruntime.GOARCH,
			nofile:  min(uint64(maxNofile), uint64(lim.Max)),
			gvisor:  gvisor,
			cdiDirs: cfg.CDISpecDirs,
		},
		gvisor: gvisor,
	}
	if gvisor {
		r.noCheckpoint = runscCheckpointSupport(cfg.GlobalArgs)
	} else {
		r.noCheckpoint = criuSupport(ctx)
	}
	return r, nil
}

// probeTimeout bounds New's probes of the binary and of CRIU.
const probeTimeout = 20 * time.Second

// runscPatched marks a runsc built by scripts/setup.sh with
// third_party/gvisor's patch: its `--version` is <version>+platinum.<hash>.
const runscPatched = "+platinum."

// Name returns the runtime class.
func (r *Runtime) Name() string { return r.cfg.Class }

// WriteConfig writes spec's config.json into spec.BundleDir without
// starting anything; Run calls it. Exposed for tools that inspect or
// hand-run a bundle.
func (r *Runtime) WriteConfig(spec runtime.Spec) error {
	b, err := encodeConfig(spec, r.pl)
	if err != nil {
		return err
	}
	if r.gvisor {
		if err := ensureTmpDir(spec); err != nil {
			return err
		}
	}
	tmp := filepath.Join(spec.BundleDir, ".config.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(spec.BundleDir, "config.json")); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	return nil
}

// RunCommand writes spec's config.json and returns the runtime command Run
// would start for it (global flags, `run --detach`, stdio on /dev/null),
// without what Run adds around it (the network namespace's preparation,
// the gVisor host cgroup's size, the OOM watch) but with the cpuset
// parents runsc needs filled in to pin: a bench's raw baseline runs it.
// Delete removes what it starts.
func (r *Runtime) RunCommand(ctx context.Context, spec runtime.Spec) (*exec.Cmd, error) {
	if err := r.WriteConfig(spec); err != nil {
		return nil, fmt.Errorf("run %s: %w", spec.ID, err)
	}
	if r.gvisor && spec.Resources.CPUs != "" && spec.CgroupPath != "" {
		if err := prepareCpusetParents(spec.CgroupPath); err != nil {
			return nil, fmt.Errorf("run %s: %w", spec.ID, err)
		}
	}
	logPath := filepath.Join(spec.BundleDir, logFile)
	args := r.args(logPath, r.containerFlags(spec), "run", "--detach", "--bundle", spec.BundleDir, spec.ID)
	return exec.CommandContext(ctx, r.binary, args...), nil
}

// logFile is the runtime's log inside the bundle; Run's errors quote it.
const logFile = "runc.log"

// Run writes config.json and starts the container detached. The runtime
// process gets /dev/null as stdin, stdout and stderr because the detached
// init inherits them: a pipe would close when we stop reading and kill the
// init with SIGPIPE, and host files break checkpointing. Errors therefore
// come from the JSON log in the bundle. Returns an error wrapping
// sandbox.ErrAlreadyExists if the ID is taken and sandbox.ErrInvalidArgument
// for a bad Spec.
func (r *Runtime) Run(ctx context.Context, spec runtime.Spec) error {
	// runsc (2024-07) answers a duplicate ID by deleting the existing
	// container's state, orphaning its still-running sandbox: refuse first.
	// (Two concurrent Runs of one ID can still race; the host layer runs one
	// operation per sandbox at a time.)
	if r.gvisor && validID.MatchString(spec.ID) && r.hasStateFile(spec.ID) {
		return fmt.Errorf("run %s: container exists: %w", spec.ID, sandbox.ErrAlreadyExists)
	}
	t0 := time.Now()
	if err := r.WriteConfig(spec); err != nil {
		return fmt.Errorf("run %s: %w", spec.ID, err)
	}
	logPath := filepath.Join(spec.BundleDir, logFile)
	if err := os.WriteFile(logPath, nil, 0o600); err != nil {
		return fmt.Errorf("run %s: %w", spec.ID, err)
	}
	args := r.args(logPath, r.containerFlags(spec), "run", "--detach", "--bundle", spec.BundleDir, spec.ID)
	t1 := time.Now()
	if err := r.start(ctx, spec, logPath, args); err != nil {
		return fmt.Errorf("run %s: %w", spec.ID, err)
	}
	t2 := time.Now()
	if err := r.started(ctx, spec, "run", "container started"); err != nil {
		return err
	}
	// The bench (bench/coldcreate.go) reports these beside the raw run.
	r.logger.DebugContext(ctx, "container run", "container", spec.ID, "config", t1.Sub(t0), "runtime_run", t2.Sub(t1), "after_run", time.Since(t2))
	return nil
}

// started finishes a start that left a container running, Run's and
// Restore's alike: gVisor's host cgroup is sized and OOM kills are
// watched. op names the call in its error, msg is the debug log line.
func (r *Runtime) started(ctx context.Context, spec runtime.Spec, op, msg string) error {
	t0 := time.Now()
	if err := r.sizeSentryCgroup(spec); err != nil {
		return fmt.Errorf("%s %s: size the host cgroup: %w", op, spec.ID, err)
	}
	t1 := time.Now()
	r.Watch(spec.ID)
	r.logger.DebugContext(ctx, msg, "container", spec.ID, "size_cgroup", t1.Sub(t0), "watch_oom", time.Since(t1))
	return nil
}

// start runs a runtime command that leaves a container running (run,
// restore). The runtime process gets /dev/null as stdin, stdout and stderr
// (nil in os/exec), see Run, so its errors come from the JSON log at
// logPath. For runsc joining a network namespace it first puts back the
// namespace's addresses if a previous sandbox took them, and starts runsc
// with /proc/sys/net hidden (see startHidingNetSysctls).
func (r *Runtime) start(ctx context.Context, spec runtime.Spec, logPath string, args []string) error {
	cmd := exec.CommandContext(ctx, r.binary, args...)
	var err error
	if r.gvisor && spec.Resources.CPUs != "" && spec.CgroupPath != "" {
		if err := prepareCpusetParents(spec.CgroupPath); err != nil {
			return fmt.Errorf("%w: %w", err, sandbox.ErrUnavailable)
		}
	}
	if r.gvisor && spec.NetNSPath != "" {
		if err := prepareNetns(spec); err != nil {
			return fmt.Errorf("network namespace: %w: %w", err, sandbox.ErrUnavailable)
		}
		if err = startHidingNetSysctls(cmd); err == nil {
			err = cmd.Wait()
		}
	} else {
		err = cmd.Run()
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	msg := lastLogError(logPath)
	if msg == "" {
		msg = err.Error()
	}
	category := classify(msg)
	if r.gvisor && spec.NetNSPath != "" && !errors.Is(category, sandbox.ErrAlreadyExists) {
		// runsc may have taken the addresses before failing.
		if err := restoreNetns(spec.BundleDir); err != nil {
			r.logger.WarnContext(ctx, "network namespace: putting addresses back", "container", spec.ID, "err", err)
		}
	}
	return fmt.Errorf("%s: %w", msg, category)
}

// State returns the container's status and init pid.
func (r *Runtime) State(ctx context.Context, id string) (runtime.State, error) {
	// A running container (the reconciler asks about every one, every
	// pass) is told from the runtime's own files, without an exec.
	if st, ok := r.runningFromFiles(id); ok {
		return st, nil
	}
	// Without its state under --root there is no container, and we save an
	// exec on every create.
	if validID.MatchString(id) && !r.hasStateFile(id) {
		return runtime.State{}, fmt.Errorf("state %s: %w", id, runtime.ErrNotFound)
	}
	s, err := r.state(ctx, id)
	if err != nil {
		return runtime.State{}, fmt.Errorf("state %s: %w", id, err)
	}
	return toState(s), nil
}

// hasStateFile reports whether Root holds state for id: runc keeps a
// directory per container, runsc a "<sandbox>_sandbox:<id>.state" file.
func (r *Runtime) hasStateFile(id string) bool {
	if r.gvisor {
		return len(runscStateFiles(r.cfg.Root, id)) > 0
	}
	_, err := os.Stat(filepath.Join(r.cfg.Root, id))
	return !errors.Is(err, fs.ErrNotExist)
}

// bundleOf returns the bundle directory of container id ("" when
// unknown). For runsc it reads the state file under Root, which names it,
// rather than running `runsc state` (tens of milliseconds, more under load).
func (r *Runtime) bundleOf(ctx context.Context, id string) string {
	if r.gvisor && validID.MatchString(id) {
		if m := runscStateFiles(r.cfg.Root, id); len(m) == 1 {
			var f struct {
				BundleDir string `json:"bundleDir"`
			}
			if b, err := os.ReadFile(m[0]); err == nil && json.Unmarshal(b, &f) == nil && f.BundleDir != "" {
				return f.BundleDir
			}
		}
	}
	if s, err := r.state(ctx, id); err == nil {
		return s.Bundle
	}
	return ""
}

// state returns the runtime's own state record (which names the bundle).
func (r *Runtime) state(ctx context.Context, id string) (ociState, error) {
	out, err := r.run(ctx, "state", id)
	if err != nil {
		return ociState{}, err
	}
	var s ociState
	if err := json.Unmarshal(out, &s); err != nil {
		return ociState{}, fmt.Errorf("decode: %w", err)
	}
	return s, nil
}

// List returns every container under Root.
func (r *Runtime) List(ctx context.Context) ([]runtime.State, error) {
	out, err := r.run(ctx, "list", "--format", "json")
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	var ss []ociState // runc prints "null" when empty
	if err := json.Unmarshal(out, &ss); err != nil {
		return nil, fmt.Errorf("list: decode: %w", err)
	}
	states := make([]runtime.State, 0, len(ss))
	for _, s := range ss {
		states = append(states, toState(s))
	}
	return states, nil
}

func toState(s ociState) runtime.State {
	st := runtime.State{ID: s.ID, Status: runtime.Status(s.Status), Pid: s.Pid}
	if st.Status == runtime.StatusStopped {
		st.Pid = 0
	}
	return st
}

// Kill sends sig to the init process. Returns runtime.ErrNotFound if the
// container does not exist and an error wrapping sandbox.ErrConflict if it
// is stopped.
func (r *Runtime) Kill(ctx context.Context, id string, sig syscall.Signal) error {
	if _, err := r.run(ctx, "kill", id, strconv.Itoa(int(sig))); err != nil {
		return fmt.Errorf("kill %s: %w", id, err)
	}
	return nil
}

// Delete kills (SIGKILL, every process of the container) and removes the
// container and its cgroup. Killing first matters: `delete --force` on a
// running container waits ≈100 ms for it to die. Deleting an absent
// container returns nil. For runsc it then gives the container's network
// namespace back the addresses gVisor took from it, so the namespace is
// again as the host layer made it.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	return r.delete(ctx, id, true)
}

// killTimeout bounds `runsc kill --all`: it answers in milliseconds unless
// the Sentry is wedged, and then never.
const killTimeout = 10 * time.Second

// delete is Delete; kill false skips `kill --all` for a container known to
// have no process left (saves a runtime call).
func (r *Runtime) delete(ctx context.Context, id string, kill bool) error {
	// Without its state under --root there is nothing to delete: save the
	// runtime calls (Stop after a checkpoint, Destroy of a stopped sandbox).
	if validID.MatchString(id) && !r.hasStateFile(id) {
		return nil
	}
	var bundle string
	if r.gvisor {
		bundle = r.bundleOf(ctx, id)
	}
	r.unwatch(id)
	if bundle != "" {
		// A sandbox stalled at its limit (its kernel OOM killer off, see
		// setSentryMemory) could not be killed: let the kernel have it.
		enableOOMKiller(bundle)
	}
	t0 := time.Now()
	// Errors are expected here (already stopped, absent); delete decides.
	if kill {
		kctx, cancel := context.WithTimeout(ctx, killTimeout)
		r.run(kctx, "kill", "--all", id, "KILL")
		cancel()
		if kctx.Err() == context.DeadlineExceeded && bundle != "" {
			// A wedged Sentry (a checkpoint deadlocked in gVisor's
			// netstack) never answers `kill`; its processes die all the
			// same, and `delete --force` then finds it gone.
			r.logger.WarnContext(ctx, "runtime kill did not answer; killing the sandbox's processes", "container", id)
			killCgroupAndWait(ctx, bundle, 5*time.Second)
		}
	}
	t1 := time.Now()
	if _, err := r.run(ctx, "delete", "--force", id); err != nil {
		if errors.Is(err, runtime.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", id, err)
	}
	t2 := time.Now()
	if bundle != "" {
		if err := restoreNetns(bundle); err != nil {
			return fmt.Errorf("delete %s: network namespace: %w", id, err)
		}
	}
	r.logger.DebugContext(ctx, "container deleted", "container", id, "kill", t1.Sub(t0), "delete", t2.Sub(t1), "netns", time.Since(t2))
	return nil
}

// Update changes the limits of a running container in place. Zero fields
// are left unchanged. Shrinking memory below current usage fails (the
// runtime's error wraps sandbox.ErrConflict when recognised). runsc has no
// update command: for gvisor Update writes the sandbox's host cgroup
// instead (see cgroup.go), with the same effect on the host's limits.
func (r *Runtime) Update(ctx context.Context, id string, res runtime.Resources) error {
	if err := validateResources(res); err != nil {
		return fmt.Errorf("update %s: %w", id, err)
	}
	if r.gvisor {
		if err := r.updateCgroup(ctx, id, res); err != nil {
			return fmt.Errorf("update %s: %w", id, err)
		}
		return nil
	}
	args := []string{"update"}
	if res.CPU > 0 {
		args = append(args, "--cpu-period", strconv.Itoa(cpuPeriod),
			"--cpu-quota", strconv.FormatInt(cpuQuota(res.CPU), 10))
	}
	if res.CPUs != "" {
		args = append(args, "--cpuset-cpus", res.CPUs)
	}
	if res.MemoryBytes > 0 {
		m := strconv.FormatInt(res.MemoryBytes, 10)
		args = append(args, "--memory", m, "--memory-swap", m)
	}
	if res.Pids > 0 {
		args = append(args, "--pids-limit", strconv.FormatInt(res.Pids, 10))
	}
	if len(args) == 1 {
		return nil
	}
	if _, err := r.run(ctx, append(args, id)...); err != nil {
		return fmt.Errorf("update %s: %w", id, err)
	}
	return nil
}

// Pause freezes every process of the container (cgroup freezer). On
// cgroup v1 runc gives up with "unable to freeze" (and thaws the cgroup
// again) when it stays FREEZING through runc's own retries, which a busy
// host causes: a process that is not scheduled does not enter the freezer.
// A full test run on a host whose cores other work kept busy saw it once,
// and the stop that asked lost the sandbox's memory (it falls back to
// disk-only), so Pause tries again, after pauses that grow (pauseRetry),
// before it gives up.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	var err error
	for i := range pauseAttempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("pause %s: %w (%w)", id, ctx.Err(), err)
			case <-time.After(pauseRetry << (i - 1)):
			}
		}
		if _, err = r.run(ctx, "pause", id); err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "unable to freeze") {
			break
		}
	}
	return fmt.Errorf("pause %s: %w", id, err)
}

// pauseAttempts and pauseRetry bound Pause's retries of a freeze that did
// not take: 100, 200 and 400 ms apart, at most 0.7 s more than runc's own.
const (
	pauseAttempts = 4
	pauseRetry    = 100 * time.Millisecond
)

// Resume thaws a paused container.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	if _, err := r.run(ctx, "resume", id); err != nil {
		return fmt.Errorf("resume %s: %w", id, err)
	}
	return nil
}

// Stats reads the container's cgroup counters once.
func (r *Runtime) Stats(ctx context.Context, id string) (runtime.Stats, error) {
	out, err := r.run(ctx, "events", "--stats", id)
	if err != nil {
		return runtime.Stats{}, fmt.Errorf("stats %s: %w", id, err)
	}
	var ev ociEvent
	if err := json.Unmarshal(out, &ev); err != nil {
		return runtime.Stats{}, fmt.Errorf("stats %s: decode: %w", id, err)
	}
	d := ev.Data
	st := runtime.Stats{
		CPUUsageNanos:    d.CPU.Usage.Total,
		MemoryUsageBytes: d.Memory.Usage.Usage,
		MemoryLimitBytes: d.Memory.Usage.Limit,
		Pids:             d.Pids.Current,
	}
	if st.MemoryLimitBytes == 0 && r.gvisor {
		// runsc reports the sandbox's own accounting, without the limit:
		// the sandbox's memory is the size config.json asked for (what its
		// guest sees); its host cgroup is larger by the Sentry's overhead.
		st.MemoryLimitBytes = r.configMemoryLimit(ctx, id)
		if b := r.bundleOf(ctx, id); b != "" && st.MemoryLimitBytes == 0 {
			st.MemoryLimitBytes = cgroupMemoryLimit(b)
		}
	}
	return st, nil
}

// configPids reads the pids limit config.json in bundle asked for (the
// sandbox's task limit; 0 when unknown). For gVisor the config holds the
// host's scaled limit: this returns what the runtime was asked for only up
// to that scaling, which gvisorTasks caps by memory anyway.
func (r *Runtime) configPids(bundle string) int64 {
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return 0
	}
	var cfg specs.Spec
	if json.Unmarshal(b, &cfg) != nil || cfg.Linux == nil || cfg.Linux.Resources == nil || cfg.Linux.Resources.Pids == nil ||
		cfg.Linux.Resources.Pids.Limit == nil {
		return 0
	}
	n := *cfg.Linux.Resources.Pids.Limit
	if r.gvisor {
		n = (n - gvisorTasksOverhead) / gvisorTasksPerProcess
	}
	return max(n, 0)
}

// configMemoryLimit reads the memory limit from the container's
// config.json; 0 when unknown or unlimited.
func (r *Runtime) configMemoryLimit(ctx context.Context, id string) uint64 {
	bundle := r.bundleOf(ctx, id)
	if bundle == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return 0
	}
	var cfg specs.Spec
	if json.Unmarshal(b, &cfg) != nil || cfg.Linux == nil || cfg.Linux.Resources == nil ||
		cfg.Linux.Resources.Memory == nil || cfg.Linux.Resources.Memory.Limit == nil || *cfg.Linux.Resources.Memory.Limit < 0 {
		return 0
	}
	return uint64(*cfg.Linux.Resources.Memory.Limit)
}

// args builds a command line: global flags, then extra global flags (which
// win over GlobalArgs: runsc keeps the last value of a repeated flag),
// then the subcommand. logPath may be empty (logs then go to stderr, which
// run captures).
func (r *Runtime) args(logPath string, extra []string, sub ...string) []string {
	a := []string{"--root", r.cfg.Root, "--log-format", "json"}
	if logPath != "" {
		a = append(a, "--log", logPath)
	}
	a = append(a, r.cfg.GlobalArgs...)
	a = append(a, extra...)
	return append(a, sub...)
}

// run executes a short-lived subcommand that starts no container process,
// so capturing its stdio with pipes is safe. Errors carry the runtime's
// message and wrap a category from classify.
func (r *Runtime) run(ctx context.Context, sub ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, r.binary, r.args("", nil, sub...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		msg := lastError(stderr.Bytes())
		if msg == "" {
			msg = err.Error()
		}
		return nil, &cmdError{msg: msg, category: classify(msg)}
	}
	return stdout.Bytes(), nil
}

// cmdError is a failed runtime command: its message and category.
type cmdError struct {
	msg      string
	category error
}

func (e *cmdError) Error() string { return e.msg }
func (e *cmdError) Unwrap() error { return e.category }

// classify maps a runtime's error message onto an error category. The
// strings are runc's (libcontainer) and runsc's; an unknown message maps
// to sandbox.ErrUnavailable.
func classify(msg string) error {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "does not exist") || strings.Contains(m, "not found") && strings.Contains(m, "container"):
		return notFound
	case strings.Contains(m, "already exists") || strings.Contains(m, "id exists"):
		return sandbox.ErrAlreadyExists
	case strings.Contains(m, "not running") || strings.Contains(m, "not paused") || strings.Contains(m, "stopped") ||
		strings.Contains(m, "is paused") || strings.Contains(m, "device or resource busy") ||
		// runc's EBUSY on a memory limit below what the container uses
		// (runc 1.1 names no errno).
		strings.Contains(m, "unable to set memory limit"):
		return sandbox.ErrConflict
	default:
		return sandbox.ErrUnavailable
	}
}

// notFound is both runtime.ErrNotFound (what the contract promises) and
// sandbox.ErrNotFound (what transports map to 404).
var notFound = fmt.Errorf("%w: %w", runtime.ErrNotFound, sandbox.ErrNotFound)

// lastError extracts the last error message from runtime output that is
// either JSON log entries ({"level":"error","msg":…}; runc ends each with a
// newline, runsc writes them back to back) or plain text.
func lastError(out []byte) string {
	if msg, ok := lastJSONError(out); ok {
		return msg
	}
	var last, lastAny string
	for _, line := range bytes.Split(out, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var entry struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal(line, &entry) == nil && entry.Msg != "" {
			lastAny = entry.Msg
			if entry.Level == "error" || entry.Level == "fatal" {
				last = entry.Msg
			}
			continue
		}
		lastAny = string(line)
	}
	if last != "" {
		return last
	}
	return lastAny
}

// lastJSONError is lastError for output made only of JSON entries; ok is
// false if anything else is in it.
func lastJSONError(out []byte) (msg string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(out))
	var last, lastAny string
	for {
		var entry struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if err := dec.Decode(&entry); err == io.EOF {
			break
		} else if err != nil {
			return "", false
		}
		if entry.Msg == "" {
			continue
		}
		lastAny = entry.Msg
		if entry.Level == "error" || entry.Level == "fatal" {
			last = entry.Msg
		}
	}
	if last != "" {
		return last, true
	}
	return lastAny, lastAny != ""
}

func lastLogError(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return lastError(b)
}
