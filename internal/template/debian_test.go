package template

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/platinum-dev/platinum/internal/testenv"
)

// debianCacheDir is shared by every run on this machine (and by CI), so
// only the first build pays for debootstrap.
const debianCacheDir = "/var/cache/platinum/templates"

// TestBuildDebian builds pt-base twice at once into two destinations; the
// flock'd cache makes one of them run debootstrap (≈30–45 s, only the first
// time on a machine) and the other extract its result.
func TestBuildDebian(t *testing.T) {
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "debootstrap", "chroot", "tar")
	if testing.Short() {
		t.Skip("debootstrap build in -short mode")
	}
	ctx := context.Background()
	r := Registry{CacheDir: debianCacheDir}
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	var wg sync.WaitGroup
	errs := make([]error, len(dirs))
	progress := make([][]string, len(dirs))
	for i, d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Build(ctx, SlugBase, d, func(l string) { progress[i] = append(progress[i], l) })
		}()
	}
	wg.Wait()
	for i, d := range dirs {
		if errs[i] != nil {
			t.Fatalf("build %s: %v", d, errs[i])
		}
		checkProgress(t, progress[i])
		for _, p := range []string{"bin/bash", "usr/bin/ps", "usr/bin/apt-get", "etc/ssl/certs/ca-certificates.crt"} {
			if _, err := os.Stat(filepath.Join(d, p)); err != nil {
				t.Errorf("%s: %v", d, err)
			}
		}
		out, err := exec.Command("chroot", d, "/bin/bash", "-c",
			"id -u user; getent passwd user | cut -d: -f6,7; cat /etc/hostname; ls /var/lib/apt/lists | grep -c _ ; apt-get --version | head -1").CombinedOutput()
		if err != nil {
			t.Fatalf("chroot %s: %v: %s", d, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 5 || lines[0] != "1000" || lines[1] != "/home/user:/bin/bash" || lines[2] != "sandbox" ||
			lines[3] != "0" || !strings.HasPrefix(lines[4], "apt ") {
			t.Errorf("chroot %s output:\n%s", d, out)
		}
		fi, err := os.Stat(filepath.Join(d, "home/user"))
		if err != nil {
			t.Fatal(err)
		}
		if uid := statUID(fi); uid != 1000 {
			t.Errorf("home/user uid = %d, want 1000", uid)
		}
	}
	entries, err := os.ReadDir(debianCacheDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("cache dir holds a temporary file: %s", e.Name())
		}
	}
}

func checkProgress(t *testing.T, lines []string) {
	t.Helper()
	last := -1
	for _, l := range lines {
		pctStr, _, ok := strings.Cut(l, "% ")
		pct, err := strconv.Atoi(pctStr)
		if !ok || err != nil {
			t.Errorf("progress line %q: want \"NN%% message\"", l)
			continue
		}
		if pct < last {
			t.Errorf("progress went backwards: %q after %d%%", l, last)
		}
		last = pct
	}
	if last != 100 {
		t.Errorf("progress ended at %d%%, want 100 (lines %q)", last, lines)
	}
}
