package host

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMountedUsage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to mount a tmpfs")
	}
	mnt := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := mountedUsage(mnt); err == nil {
		t.Fatal("usage of an unmounted directory: want an error, not the parent file system's figures")
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(mnt, "f"), make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	used, size, err := mountedUsage(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if size != 16<<20 || used < 4<<20 || used > 5<<20 {
		t.Errorf("usage = %d of %d bytes, want ~4 MiB of 16 MiB", used, size)
	}
}
