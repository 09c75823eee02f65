// Package host runs sandboxes on this machine: it composes the disk pool,
// per-sandbox networking, the OCI runtime and template builds into the
// operations the control plane needs (hostapi.Host). Every operation
// is "make it so": it creates what is missing and reuses what exists, so a
// crash at any point is repaired by calling it again.
package host

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/egress"
	"github.com/platinum-dev/platinum/internal/host/disk"
	"github.com/platinum-dev/platinum/internal/host/gpu"
	"github.com/platinum-dev/platinum/internal/host/network"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/image"
	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/oci"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/template"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Config configures a host.
type Config struct {
	// DataDir holds everything this host owns.
	DataDir string
	// AgentBinary is the pt-agent executable to inject into sandboxes.
	AgentBinary string
	// RuntimeBinary is the OCI runtime for the runc class.
	RuntimeBinary string
	// CgroupParent is the cgroup under which every sandbox gets its own.
	CgroupParent string
	// PidsLimit caps tasks per sandbox.
	PidsLimit int64
	// SandboxCPUWeight is CgroupParent's CPU weight (cgroup v2 scale; 0
	// leaves it alone), below ptd's default 100 so that sandboxes using
	// every core still leave the API its share (oci.SetParentCPUWeight).
	SandboxCPUWeight int
	// TemplateCacheDir keeps built template tarballs across data dirs.
	TemplateCacheDir string
	// Network configures the sandbox bridge and address pool.
	Network network.Config
	// Egress configures the egress proxy and DNS filter (egress.go).
	Egress EgressConfig
	// AgentReadyTimeout bounds the wait for a new sandbox's agent.
	AgentReadyTimeout time.Duration
	// GPU says where to find the host's NVIDIA GPUs and their CDI specs
	// (gpus.go).
	GPU gpu.Config
	// Images configures the layer store of custom templates
	// (templater.go).
	Images ImageConfig
}

// DefaultConfig returns the defaults for a data dir.
func DefaultConfig(dataDir string) Config {
	return Config{
		DataDir:           dataDir,
		RuntimeBinary:     "runc",
		CgroupParent:      "/platinum",
		PidsLimit:         1024,
		SandboxCPUWeight:  20,
		TemplateCacheDir:  "/var/cache/platinum/templates",
		Network:           network.DefaultConfig(),
		Egress:            DefaultEgressConfig(),
		AgentReadyTimeout: 30 * time.Second,
		GPU:               gpu.DefaultConfig(),
	}
}

// Host is one machine's sandbox runner.
type Host struct {
	cfg   Config
	id    string
	log   *slog.Logger
	pool  *disk.Pool
	net   *network.Manager
	egp   *egress.Proxy              // the egress proxy; nil when turned off
	rt    runtime.Runtime            // the runc class, always there
	rts   map[string]runtime.Runtime // every class this host runs, by name
	agent string                     // the injected agent binary's path
	hc    *http.Client
	tpl   template.Registry
	gpus  *gpuAllocator
	img   *image.Store // custom templates' layers (templater.go)
	// oom gathers OOM kill reports (oom.go); oomClient makes the guard
	// polls, whose waits outlast hc's settings.
	oom       oomState
	oomClient *http.Client
}

var _ hostapi.Host = (*Host)(nil)

// Runtime classes.
const (
	ClassRunc   = "runc"
	ClassGVisor = "gvisor"
)

// Classes lists the runtime classes this host runs.
func (h *Host) Classes() []string {
	out := make([]string, 0, len(h.rts))
	for c := range h.rts {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// runtimeOf returns the runtime holding the sandbox's container (runc when
// none does: every operation on an absent container is a no-op there). The
// class recorded in the sandbox's directory at its last start answers
// without a runtime call; only sandboxes without one (made before the
// record existed) are looked for with a `runsc state` per class.
func (h *Host) runtimeOf(ctx context.Context, id string) runtime.Runtime {
	if rt, ok := h.rts[h.recordedClass(id)]; ok {
		return rt
	}
	for c, rt := range h.rts {
		if c == ClassRunc {
			continue
		}
		if _, err := rt.State(ctx, id); err == nil {
			return rt
		}
	}
	return h.rt
}

// classFile records, in the sandbox's directory, the runtime class its
// container was last started with (see runtimeOf).
const classFile = "class"

func (h *Host) recordedClass(id string) string {
	b, err := os.ReadFile(filepath.Join(h.paths(id).dir, classFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// recordClass writes the class before the container starts, so a crash
// right after leaves the record naming the class that may hold it.
func (h *Host) recordClass(id, class string) error {
	if h.recordedClass(id) == class {
		return nil
	}
	path := filepath.Join(h.paths(id).dir, classFile)
	if err := os.WriteFile(path+".tmp", []byte(class+"\n"), 0o600); err != nil {
		return fmt.Errorf("host: class: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("host: class: %w", err)
	}
	return nil
}

// agentPath is where pt-agent appears inside every sandbox.
const agentPath = hostapi.AgentPath

// Open prepares the host: data dir, disk pool, bridge and firewall,
// runtime, agent binary.
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (*Host, error) {
	h := &Host{cfg: cfg, log: logger, tpl: template.Registry{CacheDir: cfg.TemplateCacheDir}, hc: &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
	}}}
	for _, d := range []string{"sandboxes", "templates", "bin", "runtime"} {
		if err := os.MkdirAll(filepath.Join(cfg.DataDir, d), 0o700); err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
	}
	if err := h.openImages(); err != nil {
		return nil, err
	}
	id, err := loadOrCreateID(filepath.Join(cfg.DataDir, "host-id"))
	if err != nil {
		return nil, err
	}
	h.id = id
	if h.agent, err = installAgent(cfg.AgentBinary, filepath.Join(cfg.DataDir, "bin")); err != nil {
		return nil, err
	}
	if h.pool, err = disk.Open(ctx, filepath.Join(cfg.DataDir, "disks"), disk.Options{}, logger); err != nil {
		return nil, fmt.Errorf("host: disk pool: %w", err)
	}
	if !cfg.Network.Egress {
		// No egress at all: the proxy, which dials from the host, must not
		// reopen it.
		cfg.Egress.ProxyPort = 0
	}
	cfg.Network.ProxyPort, cfg.Network.DNSPort = cfg.Egress.ProxyPort, cfg.Egress.DNSPort
	if cfg.Egress.ProxyPort == 0 {
		cfg.Network.DNSPort = 0
	}
	h.cfg.Egress = cfg.Egress
	h.cfg.Network = cfg.Network
	if h.net, err = network.New(cfg.Network, logger); err != nil {
		return nil, fmt.Errorf("host: network: %w", err)
	}
	if err := h.net.Setup(ctx); err != nil {
		return nil, fmt.Errorf("host: network: %w", err)
	}
	if err := h.openEgress(ctx); err != nil {
		return nil, err
	}
	h.adoptEndpoints(ctx)
	// NewRuntime probes CRIU for runc: with CRIU >= 4.1 passing `criu
	// check`, stops checkpoint; otherwise they freeze (see checkpoint.go).
	h.gpus = &gpuAllocator{inv: gpu.Probe(ctx, cfg.GPU), dir: filepath.Join(cfg.DataDir, "sandboxes"), live: h.containerLive}
	if n := len(h.gpus.inv.GPUs); n > 0 {
		logger.Info("GPUs found", "gpus", n, "usable", len(h.gpus.inv.Usable()), "driver", h.gpus.inv.Driver, "problem", h.gpus.inv.Problem)
	}
	if h.rt, err = oci.NewRuntime(oci.Config{Binary: cfg.RuntimeBinary, Root: filepath.Join(cfg.DataDir, "runtime"), CDISpecDirs: cfg.GPU.CDISpecDirs}, logger); err != nil {
		return nil, fmt.Errorf("host: runtime: %w", err)
	}
	h.rts = map[string]runtime.Runtime{ClassRunc: h.rt}
	if cfg.SandboxCPUWeight > 0 {
		if err := oci.SetParentCPUWeight(cfg.CgroupParent, cfg.SandboxCPUWeight); err != nil {
			// Sandboxes still run; only the API's share under full load is
			// not protected.
			logger.WarnContext(ctx, "sandbox cgroup parent keeps its default CPU weight", "cgroup", cfg.CgroupParent, "err", err)
		}
	}
	if _, err := os.Stat(filepath.Join(lxcfsDir, "proc", "meminfo")); err != nil && isMounted(lxcfsDir) {
		// A dead LXCFS leaves its FUSE mount: runc sandboxes still start,
		// but see the host's memory and CPUs until it runs again.
		logger.WarnContext(ctx, "LXCFS is mounted but does not answer; runc sandboxes will see the host's /proc/meminfo and CPU count until it is restarted (scripts/setup.sh does)",
			"dir", lxcfsDir, "err", err)
	}
	// Container processes re-parented when a runtime command exits become
	// ours to reap at once rather than PID 1's (see oci.StartReaper).
	oci.StartReaper(logger)
	// The gvisor class runs wherever runsc is installed (scripts/setup.sh
	// installs it from bookworm-backports).
	if _, err := exec.LookPath("runsc"); err == nil {
		gcfg := oci.GVisorConfig(filepath.Join(cfg.DataDir, "runtime-gvisor"))
		gcfg.CDISpecDirs = cfg.GPU.CDISpecDirs
		g, err := oci.NewRuntime(gcfg, logger)
		if err != nil {
			return nil, fmt.Errorf("host: gvisor runtime: %w", err)
		}
		h.rts[ClassGVisor] = g
	}
	// No kept connections: addresses go to the next sandbox after a
	// delete, and a poll lasts long enough that a dial is nothing.
	h.oomClient = &http.Client{Transport: &http.Transport{
		DialContext:       (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		DisableKeepAlives: true,
	}}
	h.initOOM()
	return h, nil
}

// ID implements hostapi.Host.
func (h *Host) ID() string { return h.id }

// Templates implements hostapi.Host.
func (h *Host) Templates() []string { return h.tpl.Slugs() }

// BuildTemplate implements hostapi.Host.
func (h *Host) BuildTemplate(ctx context.Context, slug, versionID string, progress func(string)) (string, int64, error) {
	dir := filepath.Join(h.cfg.DataDir, "templates", versionID)
	dest := filepath.Join(dir, "rootfs")
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, err
	}
	if err := h.tpl.Build(ctx, slug, dest, progress); err != nil {
		os.RemoveAll(dir)
		return "", 0, err
	}
	return dest, dirSize(dest), nil
}

func dirSize(root string) int64 {
	var n int64
	filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// checkID refuses an id that is not a sandbox ID, before it names a path
// under the data dir.
func checkID(id string) error {
	if !sandbox.ValidID(sandbox.PrefixSandbox, id) {
		return fmt.Errorf("host: bad sandbox id %q: %w", id, sandbox.ErrInvalidArgument)
	}
	return nil
}

// leaving starts Destroy and Release: id checked and the sandbox's guard
// poll ended, as its containers are about to go; it returns its paths.
func (h *Host) leaving(id string) (paths, error) {
	if err := checkID(id); err != nil {
		return paths{}, err
	}
	h.unwatchOOM(id)
	return h.paths(id), nil
}

// paths of one sandbox's host files.
type paths struct{ dir, bundle, diskMnt, upper, work, rootfs string }

func (h *Host) paths(id string) paths {
	dir := filepath.Join(h.cfg.DataDir, "sandboxes", id)
	return paths{
		dir: dir, bundle: filepath.Join(dir, "bundle"), diskMnt: filepath.Join(dir, "disk"),
		upper: filepath.Join(dir, "disk", "upper"), work: filepath.Join(dir, "disk", "work"),
		rootfs: filepath.Join(dir, "rootfs"),
	}
}

// Start implements hostapi.Host.
func (h *Host) Start(ctx context.Context, spec hostapi.StartSpec) (hostapi.Instance, error) {
	inst, err := h.start(ctx, spec, agentWait(h.cfg.AgentReadyTimeout/3))
	if err == nil || ctx.Err() != nil || !errors.Is(err, errAgentDown) {
		return inst, err
	}
	// What an earlier, killed ptd left half-made (a container started by an
	// orphaned runtime call, a network endpoint without its route) can keep
	// the agent unreachable: rebuild container and network once. The disk
	// is kept.
	h.log.WarnContext(ctx, "agent unreachable; rebuilding the sandbox's container and network", "sandbox", spec.ID, "err", err)
	rt := h.runtimeOf(ctx, spec.ID)
	if err := errors.Join(rt.Delete(ctx, spec.ID), h.net.Detach(ctx, spec.ID)); err != nil {
		return hostapi.Instance{}, fmt.Errorf("host: rebuild: %w", err)
	}
	return h.start(ctx, spec, agentWait(h.cfg.AgentReadyTimeout))
}

// agentWait scales an agent-ready wait with the host's load: on a host
// whose run queue is n times its cores, a sandbox's agent takes about n
// times as long to come up, and giving up on it early only adds a rebuild
// to the load (the boot's own deadline still bounds the whole start).
func agentWait(base time.Duration) time.Duration {
	f := 1.0
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			if l, err := strconv.ParseFloat(fs[0], 64); err == nil {
				f = l / float64(goruntime.NumCPU())
			}
		}
	}
	return time.Duration(float64(base) * min(max(f, 1), 6))
}

// containerExists reports whether the runtime of spec's class has a
// container of that id (in any state), and true when the runtime cannot
// tell: then Start keeps its short first wait for the agent.
func (h *Host) containerExists(ctx context.Context, spec hostapi.StartSpec) bool {
	class := spec.Runtime
	if class == "" {
		class = ClassRunc
	}
	rt, ok := h.rts[class]
	if !ok {
		return false
	}
	_, err := rt.State(ctx, spec.ID)
	return !errors.Is(err, runtime.ErrNotFound)
}

// errAgentDown marks a start whose agent never answered.
var errAgentDown = errors.New("agent did not come up")

func (h *Host) start(ctx context.Context, spec hostapi.StartSpec, agentTimeout time.Duration) (hostapi.Instance, error) {
	if err := checkID(spec.ID); err != nil {
		return hostapi.Instance{}, err
	}
	p := h.paths(spec.ID)
	for _, d := range []string{p.bundle, p.diskMnt, p.rootfs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return hostapi.Instance{}, fmt.Errorf("host: %w", err)
		}
	}
	if err := h.prepareClone(ctx, spec); err != nil {
		return hostapi.Instance{}, err
	}
	resized, err := h.dropStaleMemory(ctx, spec)
	if err != nil {
		return hostapi.Instance{}, err
	}
	// Disk and network do not depend on each other: set them up together.
	t0 := time.Now()
	var ep network.Endpoint
	// fresh: nothing of this sandbox existed on the host before this call
	// (no endpoint, no container), so nothing half-made can keep its agent
	// away, and a slow agent is only a slow boot (say, many at once on a
	// loaded host): it gets the whole AgentReadyTimeout, not the short
	// first wait after which Start tears down and boots again.
	fresh := !h.containerExists(ctx, spec)
	netErr := make(chan error, 1)
	go func() {
		var err error
		if e, ok := h.net.Endpoint(spec.ID); ok {
			ep, fresh = e, false
		} else if ep, err = h.net.Attach(ctx, spec.ID); err != nil {
			err = fmt.Errorf("host: network: %w", err)
		}
		netErr <- err
	}()
	diskErr := h.ensureDisk(ctx, spec, p)
	if diskErr == nil && !isMounted(p.rootfs) {
		diskErr = h.installEgressCA(spec, p)
	}
	if diskErr == nil && !isMounted(p.rootfs) {
		if err := disk.MountOverlay(ctx, spec.RootFS, p.upper, p.work, p.rootfs); err != nil {
			diskErr = fmt.Errorf("host: rootfs: %w", err)
		}
	}
	if err := errors.Join(diskErr, <-netErr); err != nil {
		return hostapi.Instance{}, err
	}
	if err := h.writeAddress(spec.ID, ep.Addr); err != nil {
		return hostapi.Instance{}, err
	}
	// The policy is in place before anything in the sandbox runs.
	if err := h.applyNetwork(ctx, spec.ID, ep, spec.Network); err != nil {
		return hostapi.Instance{}, err
	}
	t1 := time.Now()
	thawed, failure, err := h.ensureContainer(ctx, spec, p, ep)
	if err != nil {
		return hostapi.Instance{}, err
	}
	t2 := time.Now()
	if failure == "" {
		failure = resized
	}
	inst := hostapi.Instance{Address: ep.Addr.String(), MemoryRestored: thawed, RestoreFailure: failure}
	if fresh {
		agentTimeout = max(agentTimeout, h.cfg.AgentReadyTimeout)
	}
	rctx, cancel := context.WithTimeout(ctx, agentTimeout)
	defer cancel()
	// A copy's new identity is a runtime exec, which needs no agent: run
	// it while the agent comes up (and is re-keyed), not after.
	identity := h.startIdentity(rctx, spec, inst)
	if err := h.agentClient(inst.Address, spec.AgentToken).WaitReady(rctx); err != nil {
		<-identity
		return hostapi.Instance{}, fmt.Errorf("host: %w: %w", errAgentDown, err)
	}
	if err := h.finishClone(rctx, spec, inst, identity); err != nil {
		return hostapi.Instance{}, err
	}
	if err := h.recordSize(spec.ID, spec.CPU, spec.RAMMB); err != nil {
		return hostapi.Instance{}, err
	}
	h.log.DebugContext(ctx, "sandbox started", "sandbox", spec.ID, "disk_net", t1.Sub(t0), "container", t2.Sub(t1), "agent", time.Since(t2))
	return inst, nil
}

// ensureDisk creates and mounts the sandbox's own disk (the overlay's
// upper layer), and seeds the files that make it this sandbox.
func (h *Host) ensureDisk(ctx context.Context, spec hostapi.StartSpec, p paths) error {
	if !isMounted(p.diskMnt) {
		if err := h.mountDisk(ctx, spec, p); err != nil {
			return fmt.Errorf("host: disk: %w", err)
		}
	}
	if fi, err := os.Stat(h.pool.ImagePath(spec.ID)); err == nil && fi.Size() < int64(spec.DiskGB)<<30 {
		// A resize recorded while stopped or archived: grow before boot.
		if err := h.pool.GrowImage(ctx, spec.ID, p.diskMnt, spec.DiskGB); err != nil {
			return fmt.Errorf("host: disk: %w", err)
		}
	}
	for _, d := range []string{p.upper, p.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("host: disk: %w", err)
		}
	}
	return seedIdentity(p.upper, spec.ID, spec.RootFS)
}

// mountDisk mounts the sandbox's disk at p.diskMnt: a new sandbox takes a
// spare disk when one is ready, else its image is made (if new) and mounted.
func (h *Host) mountDisk(ctx context.Context, spec hostapi.StartSpec, p paths) error {
	if _, err := os.Stat(h.pool.ImagePath(spec.ID)); err != nil {
		if took, err := h.pool.TakeSpare(ctx, spec.ID, spec.DiskGB, p.diskMnt); err != nil || took {
			return err
		}
		if _, err := h.pool.CreateImage(ctx, spec.ID, spec.DiskGB); err != nil {
			return err
		}
	}
	return h.pool.MountImage(ctx, spec.ID, p.diskMnt)
}

// seedIdentity writes hostname, hosts and resolv.conf into the upper
// layer unless the sandbox already has its own.
func seedIdentity(upper, id, lower string) error {
	etc := filepath.Join(upper, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"hostname":    id + "\n",
		"hosts":       "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + id + "\n",
		"resolv.conf": resolvConf(),
	}
	for name, content := range files {
		dst := filepath.Join(etc, name)
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if err := os.WriteFile(dst, []byte(content), 0o644); err != nil {
			return err
		}
	}
	// Keep /etc's mode and owner from the template: overlay shows the upper
	// dir's attributes once it exists there.
	if fi, err := os.Stat(filepath.Join(lower, "etc")); err == nil {
		os.Chmod(etc, fi.Mode().Perm())
	}
	return nil
}

// resolvConf gives sandboxes the host's non-loopback nameservers (a
// loopback resolver on the host is unreachable from a sandbox).
func resolvConf() string {
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return ""
	}
	var out strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			if ip := net.ParseIP(f[1]); ip == nil || ip.IsLoopback() {
				continue
			}
		}
		if len(f) > 0 && (f[0] == "nameserver" || f[0] == "search" || f[0] == "options") {
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}

// ensureContainer makes the sandbox's container run and reports whether
// it thawed a frozen one or restored a checkpoint (memory intact) rather
// than booting it; failure says why a checkpoint that was there could not
// be restored (the sandbox then boots cold). A runtime call left running by
// a ptd that was killed may create the container under our feet: then the
// state is read again.
func (h *Host) ensureContainer(ctx context.Context, spec hostapi.StartSpec, p paths, ep network.Endpoint) (thawed bool, failure string, err error) {
	for attempt := 0; ; attempt++ {
		thawed, failure, err = h.ensureContainerOnce(ctx, spec, p, ep)
		if !errors.Is(err, sandbox.ErrAlreadyExists) || attempt == 3 {
			return thawed, failure, err
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return false, "", ctx.Err()
		}
	}
}

func (h *Host) ensureContainerOnce(ctx context.Context, spec hostapi.StartSpec, p paths, ep network.Endpoint) (thawed bool, failure string, err error) {
	class := spec.Runtime
	if class == "" {
		class = ClassRunc
	}
	rt, ok := h.rts[class]
	if !ok {
		return false, "", fmt.Errorf("host: runtime class %q is not installed here: %w", class, sandbox.ErrUnavailable)
	}
	if err := h.recordClass(spec.ID, class); err != nil {
		return false, "", err
	}
	st, err := rt.State(ctx, spec.ID)
	switch {
	case err == nil && st.Status == runtime.StatusRunning:
		// A checkpoint next to a running container means a ptd killed
		// between its restore and the image's removal: it was restored.
		if _, ok := h.checkpointed(spec.ID); ok {
			return true, "", h.removeCheckpoint(spec.ID)
		}
		return false, "", nil
	case err == nil && st.Status == runtime.StatusPaused:
		if err := rt.Resume(ctx, spec.ID); err != nil {
			return false, "", fmt.Errorf("host: thaw: %w", err)
		}
		return true, "", nil
	case err == nil:
		// Created or stopped by a crash: start it again from scratch.
		if err := rt.Delete(ctx, spec.ID); err != nil {
			return false, "", fmt.Errorf("host: runtime: %w", err)
		}
	case !errors.Is(err, runtime.ErrNotFound):
		return false, "", fmt.Errorf("host: runtime: %w", err)
	}
	rspec := runtime.Spec{
		ID: spec.ID, BundleDir: p.bundle, RootFS: p.rootfs, Hostname: spec.ID,
		NetNSPath: ep.NetNSPath, CgroupPath: h.cfg.CgroupParent + "/" + spec.ID,
		Resources: runtime.Resources{
			CPU: spec.CPU, MemoryBytes: int64(spec.RAMMB) << 20, Pids: h.cfg.PidsLimit, CPUs: cpuset(spec.ID, spec.CPU),
		},
		Args: []string{agentPath},
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"PT_AGENT_TOKEN=" + spec.AgentToken,
			"PT_AGENT_ADDR=:" + strconv.Itoa(hostapi.AgentPort),
		},
		Cwd:    "/",
		Mounts: append([]runtime.Mount{{Source: h.agent, Destination: agentPath, ReadOnly: true}}, lxcfsMounts(class)...),
	}
	if spec.GPUs > 0 {
		if rspec.CDIDevices, err = h.gpus.assign(ctx, spec.ID, spec.GPUs, spec.GPUModel); err != nil {
			return false, "", err
		}
	}
	if class == ClassGVisor {
		// gVisor has no OOM killer: pt-agent is its guard (memguard.go),
		// poked by the runtime's OOM watcher as memory grows (oom_linux.go).
		rspec.Env = append(rspec.Env, "PT_MEMORY_GUARD=poked")
	}
	if c := spec.Clone; c != nil && c.MemoryImage != "" {
		return h.restoreClone(ctx, rt, rspec, c.MemoryImage)
	}
	restored, failure, err := h.restore(ctx, rt, rspec)
	if err != nil || restored {
		return restored, "", err
	}
	if err := rt.Run(ctx, rspec); err != nil {
		return false, "", fmt.Errorf("host: runtime: %w", err)
	}
	return false, failure, nil
}

// Stop implements hostapi.Host. Keeping memory checkpoints the
// sandbox to its directory where its class can (gvisor; runc with a working
// CRIU) and freezes its cgroup otherwise (runc's warm freeze: a thaw is
// milliseconds); see checkpoint.go. Any other stop ends the container,
// drops a checkpoint, and unmounts the rootfs and disk, but keeps the disk
// image and the network endpoint, so the next start gets the same disk and
// address. A checkpointed sandbox is unmounted the same way.
func (h *Host) Stop(ctx context.Context, id string, keepMemory bool) (bool, error) {
	rt := h.runtimeOf(ctx, id)
	st, err := rt.State(ctx, id)
	if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return false, fmt.Errorf("host: stop %s: %w", id, err)
	}
	kept := false
	if h.gpus.holds(id) {
		// GPU memory is not in a checkpoint or a freeze we would keep: a
		// GPU sandbox always stops cold and gives its GPUs back.
		keepMemory = false
	}
	switch {
	case !keepMemory:
		if err := h.removeCheckpoint(id); err != nil {
			return false, fmt.Errorf("host: stop %s: %w", id, err)
		}
	case err != nil: // no container: kept only if it was checkpointed
		kept = h.Checkpointed(id)
	default:
		kept = h.stopKeepingMemory(ctx, id, rt, st)
		if kept && h.Frozen(ctx, id) {
			return true, nil
		}
	}
	p := h.paths(id)
	h.unwatchOOM(id)
	if err := rt.Delete(ctx, id); err != nil {
		return false, fmt.Errorf("host: stop %s: %w", id, err)
	}
	// Flush the disk's filesystem into its image before unmounting: when an
	// exiting process still holds the mount, the unmount is lazy and the
	// image would lag behind what the sandbox wrote (an archive taken right
	// after would miss it).
	syncfs(p.diskMnt)
	if err := errors.Join(disk.Unmount(ctx, p.rootfs), h.pool.UnmountImage(ctx, p.diskMnt)); err != nil {
		return false, fmt.Errorf("host: stop %s: %w", id, err)
	}
	if err := h.gpus.release(id); err != nil {
		return false, fmt.Errorf("host: stop %s: gpus: %w", id, err)
	}
	return kept, nil
}

// Frozen implements hostapi.Host: the sandbox's processes are frozen
// in RAM. A checkpointed sandbox is not frozen (see Checkpointed).
func (h *Host) Frozen(ctx context.Context, id string) bool {
	rt := h.runtimeOf(ctx, id)
	st, err := rt.State(ctx, id)
	return err == nil && st.Status == runtime.StatusPaused
}

func (h *Host) agentClient(addr, token string) *agentclient.Client {
	return agentclient.New("http://"+net.JoinHostPort(addr, strconv.Itoa(hostapi.AgentPort)), token, h.hc)
}

// Running implements hostapi.Host.
func (h *Host) Running(ctx context.Context, id string) bool {
	rt := h.runtimeOf(ctx, id)
	st, err := rt.State(ctx, id)
	if err != nil || st.Status != runtime.StatusRunning {
		return false
	}
	_, ok := h.net.Endpoint(id)
	if !ok {
		return false
	}
	// The runtime says the container runs: that is the answer. pt-agent is
	// its first process, so an agent that died took the container with it.
	// Its health is not asked: on a loaded host a guest busy with a long
	// command kept a gVisor agent from answering for over 15 s, and a false
	// "not running" makes the reconciler boot the sandbox again, killing
	// everything in it (tests/faults saw it on runc and gVisor).
	return true
}

// Destroy implements hostapi.Host.
func (h *Host) Destroy(ctx context.Context, id string) error {
	p, err := h.leaving(id)
	if err != nil {
		return err
	}
	var errs []error
	recorded := h.recordedClass(id)
	for c, rt := range h.rts {
		// Another class than the recorded one can hold a container only
		// by accident (a crash mid-change): State says so without running
		// the runtime when it does not, which saves runsc's three calls.
		if c != recorded && recorded != "" {
			if _, err := rt.State(ctx, id); errors.Is(err, runtime.ErrNotFound) {
				continue
			}
		}
		errs = append(errs, rt.Delete(ctx, id))
	}
	// Processes the runtime no longer knows (a runsc sandbox whose state
	// a timed-out call left half-written) end with the cgroup.
	errs = append(errs, oci.RemoveCgroup(ctx, h.cgroupPath(id)))
	h.forgetEgress(id)
	errs = append(errs, h.net.Detach(ctx, id))
	errs = append(errs, disk.Unmount(ctx, p.rootfs))
	errs = append(errs, h.pool.UnmountImage(ctx, p.diskMnt))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("host: destroy %s: %w", id, err)
	}
	if err := h.pool.RemoveImage(ctx, id); err != nil {
		return fmt.Errorf("host: destroy %s: %w", id, err)
	}
	if err := os.RemoveAll(p.dir); err != nil {
		return fmt.Errorf("host: destroy %s: %w", id, err)
	}
	return nil
}

// Reset destroys every sandbox on this host and removes the bridge,
// firewall chains, disk pool mount and the sandboxes' parent cgroup:
// `ptd reset` and test cleanup.
func (h *Host) Reset(ctx context.Context) error {
	var errs []error
	entries, _ := os.ReadDir(filepath.Join(h.cfg.DataDir, "sandboxes"))
	// A sandbox's destroy mostly waits (runtime calls, unmounts, its loop
	// device's release), so a host of hundreds is reset resetWorkers at a
	// time: one at a time took seconds each on a loaded host.
	next := make(chan string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(resetWorkers, len(entries)) {
		wg.Go(func() {
			for id := range next {
				err := h.Destroy(ctx, id)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	for _, e := range entries {
		next <- e.Name()
	}
	close(next)
	wg.Wait()
	for _, rt := range h.rts {
		if cs, err := rt.List(ctx); err == nil {
			for _, c := range cs {
				errs = append(errs, rt.Delete(ctx, c.ID))
			}
		}
	}
	for _, rt := range h.rts {
		if r, ok := rt.(interface{ ReleaseRoot() error }); ok {
			errs = append(errs, r.ReleaseRoot())
		}
	}
	// The sandboxes' parent cgroup goes too, unless another data dir's
	// sandboxes are still in it (a stopped ptd's keep running, and data
	// dirs that keep the default parent share it).
	errs = append(errs, oci.RemoveParent(h.cfg.CgroupParent), h.net.Teardown(ctx), h.pool.Close(ctx))
	return errors.Join(errs...)
}

// resetWorkers is how many sandboxes Reset destroys at once.
const resetWorkers = 8

// KeepSpareDisks keeps n formatted, mounted disks of each recently used
// size (and of each size in warmGB from the start) ready for creates,
// after dropping what an earlier ptd left; see disk.Pool.EnableSpares.
// ptd serve calls it; `ptd reset` does not.
func (h *Host) KeepSpareDisks(ctx context.Context, n int, warmGB ...int) error {
	// The overlay's upper (with the /etc seedIdentity writes) and work dirs.
	if err := h.pool.EnableSpares(ctx, n, []string{"upper/etc", "work"}, warmGB...); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	return nil
}

func loadOrCreateID(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); sandbox.ValidID(sandbox.PrefixHost, id) {
			return id, nil
		}
	}
	id := sandbox.NewID(sandbox.PrefixHost)
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("host: id: %w", err)
	}
	return id, nil
}

// installAgent copies the agent binary into the data dir, so rebuilding
// the source binary never changes what running sandboxes have mounted.
func installAgent(src, binDir string) (string, error) {
	if src == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("host: agent: %w", err)
		}
		src = filepath.Join(filepath.Dir(exe), "pt-agent")
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("host: agent binary %s: %w (build it with scripts/build.sh or pass --agent-binary)", src, err)
	}
	defer in.Close()
	if err := CheckStaticAgent(src); err != nil {
		return "", fmt.Errorf("host: %w", err)
	}
	dst := filepath.Join(binDir, "pt-agent")
	tmp, err := os.CreateTemp(binDir, ".pt-agent-*")
	if err != nil {
		return "", fmt.Errorf("host: agent: %w", err)
	}
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", fmt.Errorf("host: agent: %w", err)
	}
	tmp.Chmod(0o755)
	tmp.Close()
	// Rename over the old file: a running sandbox keeps the inode it has.
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("host: agent: %w", err)
	}
	return dst, nil
}

// isMounted reports whether path is a mount point: statx's mount-root
// attribute (Linux 5.8), else the mount table. The table grows with the
// sandboxes (each holds mounts of its own) and the kernel formats all of it
// on every read, while every start asks this several times: at 700 runc
// sandboxes one read was 2,600 lines (docs/ARCHITECTURE.md, "Idle and busy
// sandboxes").
func isMounted(path string) bool {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, 0, &st)
	if err == nil && st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return false
	}
	return inMountTable(path)
}

// inMountTable reports whether path is a mount point of
// /proc/self/mountinfo.
func inMountTable(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMount(f[4]) == path {
			return true
		}
	}
	return false
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// DiskImage implements hostapi.Host: it makes sure nothing uses the
// disk (a disk-only stop) and returns the image's path.
func (h *Host) DiskImage(ctx context.Context, id string) (string, error) {
	if _, err := h.Stop(ctx, id, false); err != nil {
		return "", err
	}
	path := h.pool.ImagePath(id)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("host: disk of %s: %w", id, sandbox.ErrNotFound)
	}
	return path, nil
}

// DiskImagePath implements hostapi.Host.
func (h *Host) DiskImagePath(id string) string { return h.pool.ImagePath(id) }

// RemoveDisk implements hostapi.Host.
func (h *Host) RemoveDisk(ctx context.Context, id string) error {
	if err := h.pool.UnmountImage(ctx, h.paths(id).diskMnt); err != nil {
		return err
	}
	return h.pool.RemoveImage(ctx, id)
}

// Resize implements hostapi.Host: it changes the running sandbox's
// CPU quota and memory limit in place. Memory that cannot be freed (a
// limit below current usage) is refused by the kernel; the error wraps
// sandbox.ErrConflict and nothing changes.
func (h *Host) Resize(ctx context.Context, id string, cpu float64, ramMB int) error {
	rt := h.runtimeOf(ctx, id)
	if live, why := oci.LiveResize(rt); !live {
		// Changing only the host's limits would leave the guest at its
		// boot size while the record says otherwise.
		return fmt.Errorf("host: resize %s: %s: %w", id, why, sandbox.ErrUnavailable)
	}
	if err := rt.Update(ctx, id, runtime.Resources{CPU: cpu, MemoryBytes: int64(ramMB) << 20, Pids: h.cfg.PidsLimit, CPUs: cpuset(id, cpu)}); err != nil {
		return err
	}
	return h.recordSize(id, cpu, ramMB)
}

// sizeFile holds the cpu and ram_mb the sandbox's processes run with (set
// at each start and live resize), so a start can tell whether memory kept
// by a stop (frozen or checkpointed) still fits the size it is asked for.
const sizeFile = "size"

func (h *Host) recordSize(id string, cpu float64, ramMB int) error {
	return writeFileAtomic(filepath.Join(h.paths(id).dir, sizeFile), []byte(fmt.Sprintf("%g %d\n", cpu, ramMB)), 0o600)
}

// dropStaleMemory drops the memory a stop kept when the sandbox was
// resized since (a stopped resize recorded while the stop was still
// running, or before a ptd crash): that memory holds the old size, and the
// new one needs a cold boot. It returns why, for the start's report.
func (h *Host) dropStaleMemory(ctx context.Context, spec hostapi.StartSpec) (string, error) {
	b, err := os.ReadFile(filepath.Join(h.paths(spec.ID).dir, sizeFile))
	if err != nil {
		return "", nil // never started by this version: nothing to compare
	}
	var cpu float64
	var ram int
	if _, err := fmt.Sscanf(string(b), "%g %d", &cpu, &ram); err != nil || (cpu == spec.CPU && ram == spec.RAMMB) {
		return "", nil
	}
	st, err := h.runtimeOf(ctx, spec.ID).State(ctx, spec.ID)
	_, checkpointed := h.checkpointed(spec.ID)
	if !checkpointed && (err != nil || st.Status != runtime.StatusPaused) {
		return "", nil // no memory kept (or still running: a live resize's business)
	}
	if _, err := h.Stop(ctx, spec.ID, false); err != nil {
		return "", fmt.Errorf("host: drop memory of the old size: %w", err)
	}
	return fmt.Sprintf("resized while stopped (%g cpu / %d MB to %g / %d): booted cold at the new size", cpu, ram, spec.CPU, spec.RAMMB), nil
}

// GrowDisk implements hostapi.Host: online when the sandbox's disk is
// mounted (the guest's df sees it at once), else offline.
func (h *Host) GrowDisk(ctx context.Context, id string, newGB int) error {
	mnt := h.paths(id).diskMnt
	if !isMounted(mnt) {
		mnt = ""
	}
	return h.pool.GrowImage(ctx, id, mnt, newGB)
}

// Metrics implements hostapi.Host: live figures from the sandbox's
// cgroup (CPU over a 100 ms window), its disk and its host-side veth.
func (h *Host) Metrics(ctx context.Context, id string) (hostapi.Metrics, error) {
	rt := h.runtimeOf(ctx, id)
	s1, err := rt.Stats(ctx, id)
	if err != nil {
		return hostapi.Metrics{}, fmt.Errorf("host: metrics: %w", err)
	}
	t1 := time.Now()
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		return hostapi.Metrics{}, ctx.Err()
	}
	s2, err := rt.Stats(ctx, id)
	if err != nil {
		return hostapi.Metrics{}, fmt.Errorf("host: metrics: %w", err)
	}
	m := hostapi.Metrics{
		MemoryUsedBytes: s2.MemoryUsageBytes, MemoryLimitBytes: s2.MemoryLimitBytes, Pids: s2.Pids, At: time.Now().UTC(),
	}
	if dt := time.Since(t1); s2.CPUUsageNanos >= s1.CPUUsageNanos && dt > 0 {
		m.CPUPercent = 100 * float64(s2.CPUUsageNanos-s1.CPUUsageNanos) / float64(dt.Nanoseconds())
	}
	if used, size, err := mountedUsage(h.paths(id).diskMnt); err == nil {
		m.DiskUsedBytes, m.DiskSizeBytes = used, size
	}
	if ep, ok := h.net.Endpoint(id); ok {
		if l, err := netlink.LinkByName(ep.HostVeth); err == nil && l.Attrs().Statistics != nil {
			// The host end receives what the sandbox sends.
			m.NetTxBytes, m.NetRxBytes = l.Attrs().Statistics.RxBytes, l.Attrs().Statistics.TxBytes
		}
	}
	return m, nil
}

// Gateway is the host's address on the sandbox bridge.
func (h *Host) Gateway() netip.Addr { return h.net.Gateway() }

// cpuset picks the cores a sandbox may run on: as many as its whole CPUs
// (at most the host's), starting at a core derived from its ID so
// sandboxes spread over the host. It is what makes nproc inside show the
// sandbox's size.
func cpuset(id string, cpu float64) string {
	cores := goruntime.NumCPU()
	n := min(max(int(math.Ceil(cpu)), 1), cores)
	h := fnv.New32a()
	h.Write([]byte(id))
	start := int(h.Sum32() % uint32(cores))
	picked := make([]int, 0, n)
	for i := 0; i < n; i++ {
		picked = append(picked, (start+i)%cores)
	}
	sort.Ints(picked)
	parts := make([]string, len(picked))
	for i, c := range picked {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

// lxcfsDir is where LXCFS serves per-cgroup /proc files (scripts/setup.sh
// starts it; Debian's lxcfs package).
const lxcfsDir = "/var/lib/lxcfs"

// lxcfsMounts binds LXCFS's /proc files over the sandbox's, so
// /proc/meminfo, /proc/cpuinfo, /proc/stat and uptime show the sandbox's
// own size and usage. Without LXCFS running, sandboxes see the host's
// figures (and the resize answer says what the cgroup grants). gVisor
// virtualises /proc itself.
func lxcfsMounts(class string) []runtime.Mount {
	if class == ClassGVisor {
		return nil
	}
	if _, err := os.Stat(filepath.Join(lxcfsDir, "proc", "meminfo")); err != nil {
		return nil
	}
	var ms []runtime.Mount
	for _, f := range []string{"cpuinfo", "meminfo", "stat", "uptime", "loadavg", "diskstats", "swaps"} {
		src := filepath.Join(lxcfsDir, "proc", f)
		if _, err := os.Stat(src); err == nil {
			ms = append(ms, runtime.Mount{Source: src, Destination: "/proc/" + f})
		}
	}
	return ms
}

// Info implements hostapi.Host: what this host runs and which
// classes keep memory across stop/start, and how.
func (h *Host) Info() hostapi.HostInfo {
	info := hostapi.HostInfo{ID: h.id, Gateway: h.net.Gateway().String()}
	for _, c := range h.Classes() {
		ci := hostapi.ClassInfo{Name: c}
		ok, reason := oci.Supports(h.rts[c])
		ci.Checkpoint, ci.CheckpointReason = ok, reason
		if live, why := oci.LiveResize(h.rts[c]); !live {
			ci.NoLiveResize = why
		}
		// A class that can checkpoint writes a stopped sandbox's memory to
		// disk; the others freeze it in RAM for the warm window.
		ci.StopKeepsMemory = "freeze"
		if ok {
			ci.StopKeepsMemory = "checkpoint"
		}
		info.Classes = append(info.Classes, ci)
	}
	_, err := os.Stat(filepath.Join(lxcfsDir, "proc", "meminfo"))
	info.LXCFS = err == nil
	info.GPUs, info.GPUDriver, info.GPUProblem = gpuInfo(h.gpus.inv), h.gpus.inv.Driver, h.gpus.inv.Problem
	return info
}

// syncfs writes a mounted filesystem's dirty data and log to its device;
// a path that is not mounted is a no-op.
func syncfs(mountpoint string) {
	if !isMounted(mountpoint) {
		return
	}
	f, err := os.Open(mountpoint)
	if err != nil {
		return
	}
	defer f.Close()
	unix.Syncfs(int(f.Fd()))
}

// HasDisk implements hostapi.DiskChecker.
func (h *Host) HasDisk(id string) bool {
	_, err := os.Stat(h.pool.ImagePath(id))
	return err == nil
}

// DataDirFree implements hostapi.SpaceChecker.
func (h *Host) DataDirFree() (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(h.cfg.DataDir, &st); err != nil {
		return 0, fmt.Errorf("host: statfs %s: %w", h.cfg.DataDir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}
