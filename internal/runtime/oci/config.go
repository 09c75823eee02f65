package oci

import (
	"os"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// capabilities is Docker's default set minus NET_RAW (raw sockets: ARP/ICMP
// spoofing on the bridge) and MKNOD (device nodes: /dev is ours). It is
// given as bounding, effective and permitted; inheritable and ambient stay
// empty so an exec'd non-root program gains nothing.
var capabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_SETGID",
	"CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// maskedPaths are hidden (bound to /dev/null or an empty tmpfs): they leak
// host kernel memory, keys, timers or firmware. runc's default list plus
// Docker's powercap (RAPL energy side channel, CVE-2020-8694).
var maskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
	"/sys/firmware", "/sys/devices/virtual/powercap",
}

// readonlyPaths are host-global kernel knobs under /proc.
var readonlyPaths = []string{
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
}

// maxNofile caps RLIMIT_NOFILE; the effective value is also capped by the
// caller's hard limit because raising a hard limit needs CAP_SYS_RESOURCE,
// which ptd may not have (runc would then fail to start the container).
const maxNofile = 1048576

const (
	cpuPeriod = 100000 // µs: the CFS period quotas are relative to
	minQuota  = 1000   // µs: the kernel's minimum cfs_quota_us
	minShmMiB = 64
)

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// platform is what the generated config depends on besides the Spec; the
// golden test fixes it so config.json does not vary between machines.
type platform struct {
	goarch string
	// nofile is RLIMIT_NOFILE for the init process (soft = hard).
	nofile uint64
	// gvisor adapts limits to runsc (see gvisorPids).
	gvisor bool
	// cdiDirs are where CDI specs for Spec.CDIDevices are read (cdi.go).
	cdiDirs []string
}

// validID is runc's container ID rule.
var validID = regexp.MustCompile(`^[\w+\-.]+$`)

func validateSpec(s runtime.Spec) error {
	bad := func(field, why string) error {
		return fmt.Errorf("spec %s: %s: %w", field, why, sandbox.ErrInvalidArgument)
	}
	switch {
	case !validID.MatchString(s.ID):
		return bad("ID", fmt.Sprintf("%q is not a valid container ID", s.ID))
	case !filepath.IsAbs(s.BundleDir):
		return bad("BundleDir", "must be absolute")
	case !filepath.IsAbs(s.RootFS):
		return bad("RootFS", "must be absolute")
	case !strings.HasPrefix(s.CgroupPath, "/"):
		return bad("CgroupPath", "must start with /")
	case len(s.Args) == 0:
		return bad("Args", "empty")
	case s.NetNSPath != "" && !filepath.IsAbs(s.NetNSPath):
		return bad("NetNSPath", "must be absolute")
	}
	if err := validateResources(s.Resources); err != nil {
		return err
	}
	if err := validateCDIDevices(s.CDIDevices); err != nil {
		return err
	}
	for _, m := range s.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Destination) {
			return bad("Mounts", fmt.Sprintf("%s -> %s: paths must be absolute", m.Source, m.Destination))
		}
	}
	return nil
}

func validateResources(r runtime.Resources) error {
	if r.CPU < 0 || math.IsNaN(r.CPU) || math.IsInf(r.CPU, 0) || r.MemoryBytes < 0 || r.Pids < 0 {
		return fmt.Errorf("resources %+v: negative or not a number: %w", r, sandbox.ErrInvalidArgument)
	}
	return nil
}

// cpuQuota converts cores to a CFS quota per cpuPeriod.
func cpuQuota(cpu float64) int64 {
	q := int64(math.Round(cpu * cpuPeriod))
	if q < minQuota {
		q = minQuota
	}
	return q
}

// resources maps Resources onto OCI resources. Zero fields are left unset
// (unlimited); the host layer always sets all three. Swap is set equal to
// the memory limit: the OCI field is memory+swap, so the sandbox never
// swaps (runc converts it for cgroup v2's memory.swap.max).
func resources(r runtime.Resources, pl platform) *specs.LinuxResources {
	out := &specs.LinuxResources{Devices: deviceRules()}
	if r.MemoryBytes > 0 {
		m := r.MemoryBytes
		out.Memory = &specs.LinuxMemory{Limit: &m, Swap: &m}
	}
	if r.CPU > 0 {
		q, p := cpuQuota(r.CPU), uint64(cpuPeriod)
		out.CPU = &specs.LinuxCPU{Quota: &q, Period: &p, Cpus: r.CPUs}
	}
	if r.Pids > 0 {
		n := r.Pids
		if pl.gvisor {
			n = gvisorPids(gvisorTasks(r.Pids, r.MemoryBytes))
		}
		out.Pids = &specs.LinuxPids{Limit: &n}
	}
	return out
}

// defaultDevices are the nodes every container gets in its tmpfs /dev;
// /dev/ptmx comes from the devpts instance (ptmxmode=0666).
var defaultDevices = []struct {
	path         string
	major, minor int64
}{
	{"/dev/null", 1, 3}, {"/dev/zero", 1, 5}, {"/dev/full", 1, 7},
	{"/dev/random", 1, 8}, {"/dev/urandom", 1, 9}, {"/dev/tty", 5, 0},
}

func devices() []specs.LinuxDevice {
	var out []specs.LinuxDevice
	for _, d := range defaultDevices {
		mode, uid, gid := os.FileMode(0o666), uint32(0), uint32(0)
		out = append(out, specs.LinuxDevice{Type: "c", Path: d.path, Major: d.major, Minor: d.minor,
			FileMode: &mode, UID: &uid, GID: &gid})
	}
	return out
}

// deviceRules deny every device and allow only the default nodes, the
// pty multiplexer and pty slaves.
func deviceRules() []specs.LinuxDeviceCgroup {
	i := func(v int64) *int64 { return &v }
	rules := []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}
	for _, d := range defaultDevices {
		rules = append(rules, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: i(d.major), Minor: i(d.minor), Access: "rwm"})
	}
	return append(rules,
		specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: i(5), Minor: i(2), Access: "rwm"}, // /dev/ptmx
		specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: i(136), Access: "rwm"},            // /dev/pts/*
	)
}

func mounts(s runtime.Spec, pl platform) []specs.Mount {
	shm := int64(minShmMiB)
	// Like a Linux tmpfs default (half of RAM): pages in /dev/shm count
	// against the sandbox's memory limit anyway.
	if half := s.Resources.MemoryBytes / 2 >> 20; half > shm {
		shm = half
	}
	m := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts",
			Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm",
			Options: []string{"nosuid", "noexec", "nodev", "mode=1777", fmt.Sprintf("size=%dm", shm)}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup",
			Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
	for _, bm := range s.Mounts {
		opts := []string{"rbind", "rprivate", "nosuid", "nodev"}
		if bm.ReadOnly {
			opts = append(opts, "ro")
		}
		m = append(m, specs.Mount{Destination: bm.Destination, Type: "bind", Source: bm.Source, Options: opts})
	}
	if pl.gvisor {
		if tmp, ok := gvisorTmpMount(s); ok {
			m = append(m, tmp)
		}
	}
	return m
}

// buildConfig turns a Spec into the bundle's config.json content.
func buildConfig(s runtime.Spec, pl platform) (*specs.Spec, error) {
	if err := validateSpec(s); err != nil {
		return nil, err
	}
	env := s.Env
	if !hasPath(env) {
		env = append([]string{defaultPath}, env...)
	}
	cwd := s.Cwd
	if cwd == "" {
		cwd = "/"
	}
	caps := func() []string { return append([]string(nil), capabilities...) }
	netns := specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: s.NetNSPath}
	cfg := &specs.Spec{
		Version: ociVersion,
		Process: &specs.Process{
			User: specs.User{UID: 0, GID: 0},
			Args: s.Args,
			Env:  env,
			Cwd:  cwd,
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps(), Effective: caps(), Permitted: caps(),
				Inheritable: []string{}, Ambient: []string{},
			},
			Rlimits:         rlimits(s.Resources, pl),
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: s.RootFS, Readonly: false},
		Hostname: s.Hostname,
		Mounts:   mounts(s, pl),
		Linux: &specs.Linux{
			// ICMP echo without CAP_NET_RAW (ping uses datagram sockets).
			Sysctl:      map[string]string{"net.ipv4.ping_group_range": "0 2147483647"},
			Resources:   resources(s.Resources, pl),
			CgroupsPath: s.CgroupPath,
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, netns, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.CgroupNamespace},
			},
			Devices:       devices(),
			Seccomp:       defaultSeccomp(pl.goarch, pl.gvisor),
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
		},
	}
	if err := injectCDI(cfg, s, pl.cdiDirs); err != nil {
		return nil, err
	}
	return cfg, nil
}

// encodeConfig returns config.json's bytes for s.
func encodeConfig(s runtime.Spec, pl platform) ([]byte, error) {
	cfg, err := buildConfig(s, pl)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(cfg, "", "\t")
	if err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	return append(b, '\n'), nil
}

func hasPath(env []string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return true
		}
	}
	return false
}
