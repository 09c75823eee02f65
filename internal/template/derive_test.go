package template

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/testenv"
)

// TestBuildDerived builds python-node and node from pt-base's cache entry
// and checks that each has its runtimes, runs them, and keeps neither the
// build host's resolver nor apt's lists and downloads.
func TestBuildDerived(t *testing.T) {
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "debootstrap", "chroot", "tar")
	if testing.Short() {
		t.Skip("derived template build in -short mode")
	}
	r := Registry{CacheDir: debianCacheDir}
	for _, tc := range []struct {
		slug    string
		run     string
		want    []string
		missing []string
	}{
		{SlugPythonNode, "python3 -c 'print(6*7)'; node -e 'console.log(6*7)'", []string{"42", "42"}, nil},
		{SlugNode, "node -e 'console.log(typeof require)'", []string{"function"}, []string{"usr/bin/python3"}},
	} {
		t.Run(tc.slug, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "rootfs")
			var progress []string
			if err := r.Build(context.Background(), tc.slug, d, func(l string) { progress = append(progress, l) }); err != nil {
				t.Fatalf("build: %v", err)
			}
			checkProgress(t, progress)
			out, err := exec.Command("chroot", d, "/bin/sh", "-c", tc.run).CombinedOutput()
			if err != nil {
				t.Fatalf("run %q: %v: %s", tc.run, err, out)
			}
			if got := strings.Fields(string(out)); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("run %q = %q, want %q", tc.run, got, tc.want)
			}
			for _, p := range tc.missing {
				if _, err := os.Stat(filepath.Join(d, p)); err == nil {
					t.Errorf("%s is present in the lean template", p)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(d, "etc/resolv.conf")); len(b) != 0 {
				t.Errorf("resolv.conf kept the build host's resolver: %q", b)
			}
			if m, _ := filepath.Glob(filepath.Join(d, "var/cache/apt/archives/*.deb")); len(m) > 0 {
				t.Errorf("downloaded packages kept: %v", m)
			}
			if m, _ := filepath.Glob(filepath.Join(d, "var/lib/apt/lists/*_Packages*")); len(m) > 0 {
				t.Errorf("apt lists kept: %v", m)
			}
		})
	}
}

// TestDerivedCacheNameCoversFiles: a derived template's cache entry is
// keyed by its files too, so changing one rebuilds instead of reusing a
// tarball with the old content.
func TestDerivedCacheNameCoversFiles(t *testing.T) {
	base := DerivedOptions{Base: DebianOptions{}.withDefaults(), Packages: []string{"python3"}}
	a, b, c := base, base, base
	a.Files = map[string]string{"etc/x": "1"}
	b.Files = map[string]string{"etc/x": "2"}
	names := map[string]bool{base.cacheName(): true, a.cacheName(): true, b.cacheName(): true}
	if len(names) != 3 {
		t.Errorf("cache names collide: %v", names)
	}
	c.Files = map[string]string{"etc/x": "1"}
	if a.cacheName() != c.cacheName() {
		t.Error("the same files give another cache name")
	}
	ci := DerivedOptions{Base: base.Base, Packages: derivedPackages[SlugCodeInterpreter], Files: derivedFiles[SlugCodeInterpreter]}
	if _, ok := ci.Files[CodeInterpreterMarker]; !ok {
		t.Errorf("code-interpreter does not write its marker %s", CodeInterpreterMarker)
	}
}
