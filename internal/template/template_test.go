package template

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/testenv"
)

func TestBuildBusybox(t *testing.T) {
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "chroot")
	dest := filepath.Join(t.TempDir(), "rootfs")
	if err := BuildBusybox(context.Background(), dest); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("chroot", dest, "/bin/sh", "-c", "echo ok; id -un; ls -d /usr/bin/awk /sbin/ifconfig").CombinedOutput()
	if err != nil {
		t.Fatalf("chroot: %v: %s", err, out)
	}
	if diff := cmp.Diff("ok\nroot\n/sbin/ifconfig\n/usr/bin/awk\n", string(out)); diff != "" {
		t.Errorf("chroot output (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
		uid  uint32
	}{
		{"tmp", os.ModeDir | os.ModeSticky | 0o777, 0},
		{"root", os.ModeDir | 0o700, 0},
		{"home/user", os.ModeDir | 0o755, 1000},
		{".", os.ModeDir | 0o755, 0},
	} {
		fi, err := os.Stat(filepath.Join(dest, tc.path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != tc.mode {
			t.Errorf("%s mode = %v, want %v", tc.path, fi.Mode(), tc.mode)
		}
		if uid := statUID(fi); uid != tc.uid {
			t.Errorf("%s uid = %d, want %d", tc.path, uid, tc.uid)
		}
	}
	passwd, err := os.ReadFile(filepath.Join(dest, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(passwd), "user:x:1000:1000:user:/home/user:/bin/sh\n") {
		t.Errorf("etc/passwd lacks user:\n%s", passwd)
	}
	// No build leftovers next to dest.
	entries, _ := os.ReadDir(filepath.Dir(dest))
	if len(entries) != 1 {
		t.Errorf("dest parent has %d entries, want only rootfs", len(entries))
	}
}

func TestBuildBusyboxDestNotEmpty(t *testing.T) {
	dest := t.TempDir()
	if err := os.WriteFile(filepath.Join(dest, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := BuildBusybox(context.Background(), dest)
	if !errors.Is(err, sandbox.ErrAlreadyExists) {
		t.Fatalf("BuildBusybox into non-empty dir: %v, want ErrAlreadyExists", err)
	}
}

func TestBuildBusyboxIntoEmptyDir(t *testing.T) {
	testenv.RequiresRoot(t)
	dest := t.TempDir() // exists, empty: replaced atomically
	if err := BuildBusybox(context.Background(), dest); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dest, "bin/sh")); err != nil {
		t.Fatal(err)
	}
}

func TestRegistry(t *testing.T) {
	var r Registry
	if diff := cmp.Diff([]string{"busybox", "code-interpreter", "node", "pt-base", "python-node"}, r.Slugs()); diff != "" {
		t.Errorf("Slugs (-want +got):\n%s", diff)
	}
	err := r.Build(context.Background(), "nope", filepath.Join(t.TempDir(), "x"), nil)
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Build(unknown) = %v, want ErrNotFound", err)
	}
	if err := r.Build(context.Background(), SlugBusybox, "relative/dir", nil); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("Build(relative dest) = %v, want ErrInvalidArgument", err)
	}
}

func TestRegistryBusyboxProgress(t *testing.T) {
	testenv.RequiresRoot(t)
	var lines []string
	dest := filepath.Join(t.TempDir(), "rootfs")
	if err := (Registry{}).Build(context.Background(), SlugBusybox, dest, func(l string) { lines = append(lines, l) }); err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], "100% ") {
		t.Errorf("progress = %q, want a final 100%% line", lines)
	}
}

func TestDefaultMirror(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, sources, list, want string
	}{
		{"deb822", "Types: deb\n# URIs: http://commented/\nURIs: http://mirror.example/debian\nSuites: bookworm\n", "", "http://mirror.example/debian"},
		{"sources.list", "", "# deb http://old/\ndeb [arch=amd64 signed-by=/x.gpg] http://list.example/debian bookworm main\n", "http://list.example/debian"},
		{"plain list", "", "deb http://plain.example/debian bookworm main\n", "http://plain.example/debian"},
		{"none", "", "", fallbackMirror},
	}
	oldSources, oldList := debianSourcesPath, sourcesListPath
	t.Cleanup(func() { debianSourcesPath, sourcesListPath = oldSources, oldList })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			debianSourcesPath, sourcesListPath = filepath.Join(dir, "absent"), filepath.Join(dir, "absent")
			if tc.sources != "" {
				debianSourcesPath = write("debian.sources", tc.sources)
			}
			if tc.list != "" {
				sourcesListPath = write("sources.list", tc.list)
			}
			if got := DefaultMirror(); got != tc.want {
				t.Errorf("DefaultMirror() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDebianCacheKey(t *testing.T) {
	a := DebianOptions{Suite: "bookworm", Include: []string{"git", "procps"}}
	b := DebianOptions{Suite: "bookworm", Include: []string{"git"}, Mirror: "http://other/"}
	c := DebianOptions{Suite: "bookworm"}
	d := DebianOptions{Suite: "trixie", Include: []string{"git"}}
	if a.cacheName() != b.cacheName() {
		t.Errorf("same package set, different keys: %s %s", a.cacheName(), b.cacheName())
	}
	if a.cacheName() == c.cacheName() || a.cacheName() == d.cacheName() {
		t.Errorf("different builds share a key")
	}
	if diff := cmp.Diff([]string{"ca-certificates", "git", "procps"}, a.includes()); diff != "" {
		t.Errorf("includes (-want +got):\n%s", diff)
	}
}

func TestDebootstrapProgress(t *testing.T) {
	lines := []string{
		"I: Retrieving InRelease",
		"I: Resolving dependencies of required packages...",
		"I: Retrieving libacl1 2.3.1-3",
		"I: Validating libacl1 2.3.1-3",
		"I: Extracting libacl1...",
		"I: Installing core packages...",
		"I: Unpacking libc6:amd64...",
		"I: Configuring libc6:amd64...",
		"I: Configuring the base system...",
		"random noise",
		"I: Base system installed successfully.",
	}
	var got []string
	p := &debootstrapProgress{}
	last := 0
	for _, l := range lines {
		pct, msg, ok := p.parse(l)
		if !ok {
			continue
		}
		if pct < last {
			t.Errorf("progress went backwards at %q: %d < %d", l, pct, last)
		}
		last = pct
		got = append(got, msg)
	}
	want := []string{"fetching package lists", "resolving dependencies", "retrieving libacl1",
		"extracting libacl1", "unpacking libc6", "configuring libc6", "base system installed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if last != 95 {
		t.Errorf("final pct = %d, want 95", last)
	}
}
