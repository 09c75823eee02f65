package host

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIsMounted: the statx answer agrees with the mount table, for a mount
// point, a plain directory, a missing path and a bind mount made and
// removed here.
func TestIsMounted(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path string
		want bool
	}{
		{"/", true},
		{"/proc", true},
		{plain, false},
		{filepath.Join(dir, "missing"), false},
	}
	for _, tc := range cases {
		if got, table := isMounted(tc.path), inMountTable(tc.path); got != tc.want || table != tc.want {
			t.Errorf("isMounted(%s) = %v, mount table %v; want %v", tc.path, got, table, tc.want)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("a bind mount needs root")
	}
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{src, dst} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dst, unix.MNT_DETACH) })
	if !isMounted(dst) || !inMountTable(dst) {
		t.Fatalf("bind mount %s: isMounted %v, mount table %v; want both true", dst, isMounted(dst), inMountTable(dst))
	}
	if isMounted(src) {
		t.Fatalf("isMounted(%s), the bind's source, = true", src)
	}
	if err := unix.Unmount(dst, 0); err != nil {
		t.Fatal(err)
	}
	if isMounted(dst) {
		t.Fatalf("isMounted(%s) after unmount = true", dst)
	}
}
