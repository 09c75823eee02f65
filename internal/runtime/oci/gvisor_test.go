package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/runtime"
	"golang.org/x/sys/unix"
)

func TestGVisorPids(t *testing.T) {
	tests := []struct{ pids, want int64 }{
		{1, 66}, {24, 112}, {256, 576},
	}
	for _, tc := range tests {
		if got := gvisorPids(tc.pids); got != tc.want {
			t.Errorf("gvisorPids(%d) = %d, want %d", tc.pids, got, tc.want)
		}
	}
}

func TestRunscCheckpointSupport(t *testing.T) {
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{"default", GVisorConfig("/x").GlobalArgs, true},
		{"no network flag", []string{"--platform=systrap"}, true},
		{"host", []string{"--network=host"}, false},
		{"host, single dash", []string{"-network=host"}, false},
		{"host, separate value", []string{"--network", "host"}, false},
		{"last wins", []string{"--network=host", "--network=sandbox"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := runscCheckpointSupport(tc.args); (err == nil) != tc.ok {
				t.Errorf("runscCheckpointSupport(%q) = %v, want ok=%v", tc.args, err, tc.ok)
			}
		})
	}
}

func TestCRIUVersion(t *testing.T) {
	tests := []struct {
		out  string
		want [2]int
		ok   bool
	}{
		{"Version: 3.17.1\n", [2]int{3, 17}, true},
		{"Version: 4.1\nGitID: v4.1\n", [2]int{4, 1}, true},
		{"Version: 4.2-rc1\n", [2]int{4, 2}, true},
		{"criu: unknown option\n", [2]int{}, false},
		{"Version: 4\n", [2]int{}, false},
	}
	for _, tc := range tests {
		got, ok := criuVersion([]byte(tc.out))
		if got != tc.want || ok != tc.ok {
			t.Errorf("criuVersion(%q) = %v, %v; want %v, %v", tc.out, got, ok, tc.want, tc.ok)
		}
	}
}

// fakeRuntime is a runtime.Runtime that is neither of ours.
type fakeRuntime struct{ runtime.Runtime }

func (fakeRuntime) Name() string { return "fake" }

type fakeCheckpointer struct{ fakeRuntime }

func (fakeCheckpointer) Checkpoint(context.Context, string, string, runtime.CheckpointOptions) error {
	return nil
}
func (fakeCheckpointer) Restore(context.Context, runtime.Spec, string) error { return nil }

func TestSupports(t *testing.T) {
	noCRIU := &Runtime{noCheckpoint: errString("criu is not installed")}
	tests := []struct {
		name   string
		rt     runtime.Runtime
		ok     bool
		reason string
	}{
		{"checkpointing", &CheckpointRuntime{Runtime: &Runtime{}}, true, ""},
		{"plain without criu", noCRIU, false, "criu is not installed"},
		{"plain from New", &Runtime{}, false, "NewRuntime"},
		{"other checkpointer", fakeCheckpointer{}, true, ""},
		{"other runtime", fakeRuntime{}, false, "fake"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := Supports(tc.rt)
			if ok != tc.ok || !strings.Contains(reason, tc.reason) || tc.ok && reason != "" {
				t.Errorf("Supports = %v, %q; want %v, %q", ok, reason, tc.ok, tc.reason)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestRuntimeIsNoCheckpointer checks that the plain type does not carry
// the optional ability: a type assertion on a runc Runtime without CRIU
// must fail, or callers would checkpoint with a runtime that cannot.
func TestRuntimeIsNoCheckpointer(t *testing.T) {
	var rt runtime.Runtime = &Runtime{}
	if _, ok := rt.(runtime.Checkpointer); ok {
		t.Errorf("*Runtime implements runtime.Checkpointer")
	}
}

// TestLiveResizeByClass: gvisor never resizes live, whether or not its
// runtime is wrapped for checkpoints (as NewRuntime wraps runsc); runc does.
func TestLiveResizeByClass(t *testing.T) {
	for _, tc := range []struct {
		name string
		rt   runtime.Runtime
		want bool
	}{
		{"runc", &Runtime{}, true},
		{"runc with checkpoints", &CheckpointRuntime{Runtime: &Runtime{}}, true},
		{"gvisor", &Runtime{gvisor: true}, false},
		{"gvisor with checkpoints", &CheckpointRuntime{Runtime: &Runtime{gvisor: true}}, false},
	} {
		ok, why := LiveResize(tc.rt)
		if ok != tc.want || (ok == (why != "")) {
			t.Errorf("%s: LiveResize = %v %q, want %v", tc.name, ok, why, tc.want)
		}
	}
}

// TestGVisorSeccompOnlyEPERM: runsc answers every SCMP_ACT_ERRNO rule with
// EPERM whatever its errnoRet, so the gVisor profile has no rule that
// means another errno (a clone3 → ENOSYS rule broke every pthread_create
// under gVisor), while runc's keeps its ENOSYS fallbacks.
func TestGVisorSeccompOnlyEPERM(t *testing.T) {
	for _, gvisor := range []bool{false, true} {
		enosys := 0
		for _, r := range defaultSeccomp("amd64", gvisor).Syscalls {
			if r.ErrnoRet != nil && *r.ErrnoRet != errnoEPERM {
				enosys++
				if gvisor {
					t.Errorf("gvisor profile: %v answers errno %d, runsc would answer EPERM", r.Names, *r.ErrnoRet)
				}
			}
		}
		if !gvisor && enosys == 0 {
			t.Error("runc profile lost its ENOSYS rules (clone3, io_uring)")
		}
	}
}

// TestGVisorSizing: a gVisor sandbox runs at most one task per MiB of its
// memory (at least gvisorMinTasks, at most the pids limit), and its host
// cgroup holds its memory plus the Sentry's base and per-task overhead.
func TestGVisorSizing(t *testing.T) {
	tests := []struct {
		name              string
		pids, mem         int64
		wantTasks, wantMB int64
	}{
		{"256 MB, pids 256", 256, 256 << 20, 256, 256 + 64 + 128},
		{"256 MB, pids 4096", 4096, 256 << 20, 256, 256 + 64 + 128},
		{"512 MB, pids 256", 256, 512 << 20, 256, 512 + 64 + 128},
		{"32 MB, no pids limit", 0, 32 << 20, 64, 32 + 64 + 32},
		{"1 GB, pids 100", 100, 1 << 30, 100, 1024 + 64 + 50},
		{"no memory limit", 300, 0, 300, 0 + 64 + 150},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tasks := gvisorTasks(tc.pids, tc.mem)
			if tasks != tc.wantTasks {
				t.Errorf("gvisorTasks(%d, %d) = %d, want %d", tc.pids, tc.mem, tasks, tc.wantTasks)
			}
			if got := gvisorHostMemory(tc.mem, tasks); got != tc.wantMB<<20 {
				t.Errorf("gvisorHostMemory = %d MiB, want %d", got>>20, tc.wantMB)
			}
		})
	}
}

// TestSetSentryMemoryV2: on cgroup v2 (a directory stands in for the
// cgroup; this machine's hierarchy is hybrid) a gVisor sandbox's host
// cgroup throttles at its host size, ends at the stall room above it, and
// ends as a whole: a Sentry that lost one systrap stub to the kernel's
// OOM killer would neither run nor exit.
func TestSetSentryMemoryV2(t *testing.T) {
	dir := t.TempDir()
	const mem, tasks = 256 << 20, 256
	if err := setSentryMemory(dir, true, mem, tasks); err != nil {
		t.Fatal(err)
	}
	host := gvisorHostMemory(mem, tasks)
	for file, want := range map[string]string{
		"memory.high":      strconv.FormatInt(host, 10),
		"memory.max":       strconv.FormatInt(host+gvisorStallRoom(mem), 10),
		"memory.oom.group": "1",
		"memory.swap.max":  "0",
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if got := string(b); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", file, got, err, want)
		}
	}
}

// TestRunscVersionArgs: --gofer-network-namespace=new is added only for a
// runsc whose `flags` lists it (older releases refuse unknown flags), and
// never over the caller's own choice.
func TestRunscVersionArgs(t *testing.T) {
	newFlags := "  -fuse\n    \tDEPRECATED\n  -gofer-network-namespace value\n    \tnetwork namespace for gofers\n"
	oldFlags := "  -fuse\n    \tDEPRECATED\n  -gso\n    \tenable host segmentation offload\n"
	base := []string{"--platform=systrap"}
	tests := []struct {
		name, flags string
		args, want  []string
	}{
		{"new release", newFlags, base, []string{"--platform=systrap", "--gofer-network-namespace=new"}},
		{"old release", oldFlags, base, base},
		{"caller's choice kept", newFlags, []string{"--gofer-network-namespace=null"}, []string{"--gofer-network-namespace=null"}},
		{"flags fails", "", base, base},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "runsc")
			script := "#!/bin/sh\nprintf '%s' '" + tc.flags + "' >&2\n"
			if tc.flags == "" {
				script = "#!/bin/sh\nexit 2\n"
			}
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			got := runscVersionArgs(context.Background(), bin, tc.args)
			if !slices.Equal(got, tc.want) {
				t.Errorf("runscVersionArgs = %q, want %q", got, tc.want)
			}
			if len(tc.args) > 0 && len(got) > len(tc.args) && &got[0] == &tc.args[0] {
				t.Error("runscVersionArgs appended into the caller's slice")
			}
		})
	}
}

// TestReleaseRoot: a null-netns pin left in a gVisor runtime's root is
// unmounted, so the root can be removed; without one, and for runc, it
// is a no-op.
func TestReleaseRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	root := t.TempDir()
	pin := filepath.Join(root, "null-netns")
	if err := os.WriteFile(pin, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/proc/self/ns/net", pin, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(pin, unix.MNT_DETACH) })
	if err := (&Runtime{cfg: Config{Root: root}}).ReleaseRoot(); err != nil {
		t.Fatalf("runc: %v", err)
	}
	if err := os.Remove(pin); err == nil {
		t.Fatal("runc's ReleaseRoot unmounted the pin")
	}
	r := &Runtime{cfg: Config{Root: root}, gvisor: true}
	for i := range 2 {
		if err := r.ReleaseRoot(); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	if err := os.Remove(pin); err != nil {
		t.Fatalf("the pin is still mounted: %v", err)
	}
}

// TestRunscIsThisTreesBuild: the runsc on PATH, which every gVisor test
// here and in tests/e2e runs, carries third_party/gvisor's patches as they
// are in this tree: scripts/setup.sh stamps its build with the hash of the
// patches in name order, so a runsc built before a patch changed (or
// without one) fails here rather than in a test of what the patch does.
func TestRunscIsThisTreesBuild(t *testing.T) {
	patches, err := filepath.Glob("../../../third_party/gvisor/*.patch")
	if err != nil || len(patches) == 0 {
		t.Fatalf("no patches found: %v", err)
	}
	h := sha256.New()
	for _, p := range patches { // Glob sorts by name, as setup.sh's glob does
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	want := runscPatched + hex.EncodeToString(h.Sum(nil))[:12]
	out, err := exec.Command("runsc", "--version").Output()
	if err != nil {
		t.Fatalf("runsc --version: %v (scripts/setup.sh installs runsc)", err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if !strings.HasSuffix(strings.TrimSpace(first), want) {
		t.Fatalf("runsc on PATH is %q, want a build ending %q: run scripts/setup.sh", first, want)
	}
}

// TestUnpatchedRunscWarns: New warns when runsc is not one scripts/setup.sh
// built with third_party/gvisor's memory limit, and only then.
func TestUnpatchedRunscWarns(t *testing.T) {
	for _, tc := range []struct {
		version string
		warns   bool
	}{
		{"runsc version v0.0.0-20260905035102-160fafc42237+platinum.08aaf3353bd6", false},
		{"runsc version VERSION_MISSING", true},
		{"runsc version release-20240708.0", true},
	} {
		t.Run(tc.version, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "runsc")
			script := "#!/bin/sh\n[ \"$1\" = --version ] && printf '%s\\nspec: 1.2.1\\n' '" + tc.version + "'\nexit 0\n"
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			cfg := GVisorConfig(filepath.Join(dir, "root"))
			cfg.Binary = bin
			if _, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
				t.Fatal(err)
			}
			if warned := strings.Contains(logs.String(), "memory limit"); warned != tc.warns {
				t.Errorf("warned %v, want %v: %s", warned, tc.warns, logs.String())
			}
		})
	}
}
