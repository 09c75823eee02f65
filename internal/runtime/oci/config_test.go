package oci

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// goldenPlatform pins what config.json depends on besides the Spec.
var goldenPlatform = platform{goarch: "amd64", nofile: 1048576}

func baseSpec() runtime.Spec {
	return runtime.Spec{
		ID:         "sbx_01golden",
		BundleDir:  "/var/lib/platinum/bundles/sbx_01golden",
		RootFS:     "/var/lib/platinum/rootfs/sbx_01golden",
		Hostname:   "golden",
		CgroupPath: "/platinum/sbx_01golden",
		Resources:  runtime.Resources{CPU: 1.5, MemoryBytes: 512 << 20, Pids: 256},
		Args:       []string{"/.platinum/pt-agent"},
	}
}

func TestConfigGolden(t *testing.T) {
	full := baseSpec()
	full.NetNSPath = "/run/netns/pt-sbx_01golden"
	full.Env = []string{"PATH=/opt/bin:/usr/bin:/bin", "PT_TOKEN=secret"}
	full.Cwd = "/home/user"
	full.Mounts = []runtime.Mount{
		{Source: "/usr/lib/platinum/pt-agent", Destination: "/.platinum/pt-agent", ReadOnly: true},
		{Source: "/var/lib/platinum/shared", Destination: "/mnt/shared"},
	}
	unlimited := baseSpec()
	unlimited.Resources = runtime.Resources{}
	tiny := baseSpec()
	tiny.Resources = runtime.Resources{CPU: 0.001, MemoryBytes: 32 << 20, Pids: 16}

	gvisor := goldenPlatform
	gvisor.gvisor = true
	// GPUs: the fixture CDI spec's device, its edits and the spec-wide ones.
	cdiDirs := []string{filepath.Join("testdata", "cdi")}
	gpu := full
	gpu.CDIDevices = []string{"nvidia.com/gpu=0"}
	gpuRunc, gpuGVisor := goldenPlatform, gvisor
	gpuRunc.cdiDirs, gpuGVisor.cdiDirs = cdiDirs, cdiDirs

	tests := []struct {
		name string
		spec runtime.Spec
		pl   platform
	}{
		{"minimal", baseSpec(), goldenPlatform},
		{"full", full, goldenPlatform},
		{"unlimited", unlimited, goldenPlatform},
		{"tiny", tiny, goldenPlatform},
		// runsc: scaled pids limit, /tmp bound to the rootfs.
		{"gvisor", full, gvisor},
		{"gpu-runc", gpu, gpuRunc},
		{"gpu-gvisor", gpu, gpuGVisor},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := encodeConfig(tc.spec, tc.pl)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "config", tc.name, "config.json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("config.json mismatch (-want +got), rerun with -update if intended:\n%s", diff)
			}
		})
	}
}

func TestConfigInvalid(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*runtime.Spec)
	}{
		{"empty id", func(s *runtime.Spec) { s.ID = "" }},
		{"id with slash", func(s *runtime.Spec) { s.ID = "a/b" }},
		{"relative bundle", func(s *runtime.Spec) { s.BundleDir = "bundle" }},
		{"relative rootfs", func(s *runtime.Spec) { s.RootFS = "rootfs" }},
		{"relative cgroup", func(s *runtime.Spec) { s.CgroupPath = "platinum/x" }},
		{"no cgroup", func(s *runtime.Spec) { s.CgroupPath = "" }},
		{"no args", func(s *runtime.Spec) { s.Args = nil }},
		{"relative netns", func(s *runtime.Spec) { s.NetNSPath = "netns" }},
		{"negative memory", func(s *runtime.Spec) { s.Resources.MemoryBytes = -1 }},
		{"negative cpu", func(s *runtime.Spec) { s.Resources.CPU = -0.5 }},
		{"negative pids", func(s *runtime.Spec) { s.Resources.Pids = -1 }},
		{"relative mount", func(s *runtime.Spec) {
			s.Mounts = []runtime.Mount{{Source: "x", Destination: "/x"}}
		}},
		{"unqualified CDI device", func(s *runtime.Spec) { s.CDIDevices = []string{"gpu0"} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec()
			tc.mutate(&s)
			if _, err := buildConfig(s, goldenPlatform); !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Errorf("buildConfig = %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestCPUQuota(t *testing.T) {
	tests := []struct {
		cpu  float64
		want int64
	}{
		{1, 100000}, {0.5, 50000}, {1.5, 150000}, {2, 200000}, {0.001, minQuota}, {0.333333, 33333},
	}
	for _, tc := range tests {
		if got := cpuQuota(tc.cpu); got != tc.want {
			t.Errorf("cpuQuota(%v) = %d, want %d", tc.cpu, got, tc.want)
		}
	}
}

func TestSeccompArchitectures(t *testing.T) {
	if diff := cmp.Diff([]specs.Arch{specs.ArchAARCH64, specs.ArchARM}, seccompArchitectures("arm64")); diff != "" {
		t.Errorf("arm64 (-want +got):\n%s", diff)
	}
	if got := seccompArchitectures("riscv64"); got != nil {
		t.Errorf("riscv64 = %v, want nil (native)", got)
	}
}

func TestPersonalityRulesCoverage(t *testing.T) {
	rules := personalityRules(1)
	denied := func(v uint64) bool {
		for _, r := range rules {
			a := r.Args[0]
			switch a.Op {
			case "SCMP_CMP_MASKED_EQ":
				if v&a.Value == a.ValueTwo {
					return true
				}
			case "SCMP_CMP_GE":
				if v >= a.Value {
					return true
				}
			default:
				t.Fatalf("unexpected op %s", a.Op)
			}
		}
		return false
	}
	for _, v := range allowedPersonalities {
		if denied(v) {
			t.Errorf("personality %#x denied, want allowed", v)
		}
	}
	for _, v := range []uint64{0x1, 0x4, 0x10, 0x8000, 0x10000, 0x40000, 0x0040008, 0x0400000, 0x0100000, 0xffffffff, 0x80000000} {
		if !denied(v) {
			t.Errorf("personality %#x allowed, want denied", v)
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		msg  string
		want error
	}{
		{"container does not exist", runtime.ErrNotFound},
		{"container does not exist", sandbox.ErrNotFound},
		{"container with id exists: abc", sandbox.ErrAlreadyExists},
		{"container not running", sandbox.ErrConflict},
		{"cannot pause a stopped container", sandbox.ErrConflict},
		{"unable to set memory limit to 1048576 (current usage: 3035136, peak usage: 3231744): device or resource busy", sandbox.ErrConflict},
		{"unable to set memory limit to 268435456 (current usage: 350822400, peak usage: 350883840)", sandbox.ErrConflict},
		{"exec format error", sandbox.ErrUnavailable},
		// runsc
		{`loading container "x": file does not exist`, runtime.ErrNotFound},
		{"sandbox is not running", sandbox.ErrConflict},
		{`cannot checkpoint container "x" in state stopped`, sandbox.ErrConflict},
		{"running container: creating container: cannot lock container metadata file: container already exists", sandbox.ErrAlreadyExists},
	}
	for _, tc := range tests {
		if got := classify(tc.msg); !errors.Is(got, tc.want) {
			t.Errorf("classify(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}

func TestLastError(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"json", `{"level":"warning","msg":"w","time":"t"}` + "\n" + `{"level":"error","msg":"boom","time":"t"}` + "\n" + `{"level":"info","msg":"later"}`, "boom"},
		{"plain", "some\nplain error\n", "plain error"},
		{"empty", "", ""},
		{"no error level", `{"level":"warning","msg":"only warning"}`, "only warning"},
		// runsc writes entries back to back, without newlines.
		{"json unseparated", `{"msg":"first","level":"error"}{"msg":"second","level":"error"}{"msg":"note","level":"info"}`, "second"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastError([]byte(tc.in)); got != tc.want {
				t.Errorf("lastError = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"relative root", Config{Binary: "runc", Class: "runc", Root: "state"}, "Root"},
		{"no binary", Config{Class: "runc", Root: "/x"}, "Binary"},
		{"no class", Config{Binary: "runc", Root: "/x"}, "Class"},
		{"ok", Config{Binary: "runc", Class: "runc", Root: "/x"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var ce *ConfigError
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tc.field != "" && (!errors.As(err, &ce) || ce.Field != tc.field):
				t.Errorf("Validate = %v, want ConfigError{Field: %s}", err, tc.field)
			}
		})
	}
}

// TestConfigCDI: what a GPU container gets from the fixture CDI spec (the
// golden files pin the whole config; this says what matters), and a
// device no spec names.
func TestConfigCDI(t *testing.T) {
	pl := goldenPlatform
	pl.cdiDirs = []string{filepath.Join("testdata", "cdi")}
	s := baseSpec()
	s.CDIDevices = []string{"nvidia.com/gpu=0"}
	cfg, err := buildConfig(s, pl)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]specs.LinuxDevice{}
	for _, d := range cfg.Linux.Devices {
		nodes[d.Path] = d
	}
	for path, mm := range map[string][2]int64{"/dev/nvidia0": {195, 0}, "/dev/nvidiactl": {195, 255}, "/dev/nvidia-uvm": {508, 0}, "/dev/null": {1, 3}} {
		d, ok := nodes[path]
		if !ok || d.Type != "c" || d.Major != mm[0] || d.Minor != mm[1] {
			t.Errorf("device %s: %+v (present %v), want c %d:%d", path, d, ok, mm[0], mm[1])
		}
	}
	// The default rule denies every device; the GPU's are allowed after it.
	rules := cfg.Linux.Resources.Devices
	if rules[0].Allow || rules[0].Major != nil {
		t.Fatalf("first device rule %+v, want deny all", rules[0])
	}
	allowed := func(major, minor int64) bool {
		for _, r := range rules[1:] {
			if r.Allow && r.Type == "c" && r.Major != nil && *r.Major == major && r.Minor != nil && *r.Minor == minor && r.Access == "rwm" {
				return true
			}
		}
		return false
	}
	if !allowed(195, 0) || !allowed(195, 255) || !allowed(508, 0) {
		t.Errorf("GPU device rules missing: %+v", rules)
	}
	if allowed(195, 1) {
		t.Error("a GPU the container was not given is allowed")
	}
	var libcuda bool
	for _, m := range cfg.Mounts {
		if m.Destination == "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05" && m.Type == "bind" && slices.Contains(m.Options, "ro") {
			libcuda = true
		}
	}
	if !libcuda {
		t.Errorf("the driver library is not bound read-only: %+v", cfg.Mounts)
	}
	if cfg.Hooks == nil || len(cfg.Hooks.CreateContainer) != 1 || cfg.Hooks.CreateContainer[0].Path != "/usr/bin/nvidia-cdi-hook" {
		t.Errorf("hooks: %+v", cfg.Hooks)
	}
	if !slices.Contains(cfg.Process.Env, "NVIDIA_VISIBLE_DEVICES=void") {
		t.Errorf("env: %v", cfg.Process.Env)
	}
	// Isolation is untouched: same capabilities, seccomp, namespaces.
	plain, err := buildConfig(baseSpec(), goldenPlatform)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(plain.Process.Capabilities, cfg.Process.Capabilities); d != "" {
		t.Errorf("capabilities changed:\n%s", d)
	}
	if d := cmp.Diff(plain.Linux.Seccomp, cfg.Linux.Seccomp); d != "" {
		t.Errorf("seccomp changed:\n%s", d)
	}

	s.CDIDevices = []string{"nvidia.com/gpu=7"}
	if _, err := buildConfig(s, pl); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("unknown CDI device: %v, want ErrUnavailable", err)
	}
	pl.cdiDirs = []string{t.TempDir()}
	s.CDIDevices = []string{"nvidia.com/gpu=0"}
	if _, err := buildConfig(s, pl); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("no CDI spec at all: %v, want ErrUnavailable", err)
	}
}

// TestGPUFlags: runsc gets --nvproxy for a container with GPUs, after
// its network flags; runc gets no flag (the spec carries everything).
func TestGPUFlags(t *testing.T) {
	gpu := baseSpec()
	gpu.CDIDevices = []string{"nvidia.com/gpu=0"}
	tests := []struct {
		name   string
		gvisor bool
		spec   runtime.Spec
		want   []string
	}{
		{"runc", false, gpu, nil},
		{"gvisor", true, gpu, []string{"--network=none", "--nvproxy"}},
		{"gvisor without GPUs", true, baseSpec(), []string{"--network=none"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Runtime{gvisor: tc.gvisor, cfg: GVisorConfig("/run/x")}
			if d := cmp.Diff(tc.want, r.containerFlags(tc.spec)); d != "" {
				t.Errorf("flags (-want +got):\n%s", d)
			}
			args := r.args("/b/runc.log", r.containerFlags(tc.spec), "run", "--detach", "--bundle", "/b", tc.spec.ID)
			if tc.gvisor && len(tc.spec.CDIDevices) > 0 && !slices.Contains(args, "--nvproxy") {
				t.Errorf("runsc run without --nvproxy: %v", args)
			}
		})
	}
}
