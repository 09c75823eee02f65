package disk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/testenv"
)

const testPoolSize = 16 << 30 // sparse; big enough for the 1–2 GB images below

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// loopLines returns the `losetup -a` lines that mention dir.
func loopLines(t *testing.T, dir string) []string {
	t.Helper()
	out, err := exec.Command("losetup", "-a").CombinedOutput()
	if err != nil {
		t.Fatalf("losetup -a: %v: %s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, dir) {
			lines = append(lines, l)
		}
	}
	return lines
}

// testDir returns a fresh directory on the host's (non-reflink) disk and
// checks, after every other cleanup of the test, that no loop device and
// no mount under it is left.
func testDir(t *testing.T) string {
	t.Helper()
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "mkfs.xfs", "xfs_growfs", "losetup")
	dir := t.TempDir()
	t.Cleanup(func() {
		if l := loopLines(t, dir); len(l) > 0 {
			t.Errorf("leaked loop devices:\n%s", strings.Join(l, "\n"))
		}
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		for _, l := range strings.Split(string(mounts), "\n") {
			if strings.Contains(l, dir) {
				t.Errorf("leaked mount: %s", l)
			}
		}
	})
	return dir
}

func openPool(t *testing.T, dir string, size int64) *Pool {
	t.Helper()
	p, err := Open(context.Background(), dir, Options{PoolSizeBytes: size}, testLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func mountImage(t *testing.T, p *Pool, name, mnt string) {
	t.Helper()
	if err := p.MountImage(context.Background(), name, mnt); err != nil {
		t.Fatalf("MountImage %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := p.UnmountImage(context.Background(), mnt); err != nil {
			t.Errorf("UnmountImage %s: %v", mnt, err)
		}
	})
}

// mountedImage opens a pool in a fresh test dir with one 1 GB image
// called name, mounted (until cleanup) at a temporary dir, and returns the
// pool and the mount point.
func mountedImage(t *testing.T, name string) (*Pool, string) {
	t.Helper()
	p := openPool(t, testDir(t), testPoolSize)
	if _, err := p.CreateImage(context.Background(), name, 1); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), name)
	mountImage(t, p, name, mnt)
	return p, mnt
}

func statfs(t *testing.T, path string) unix.Statfs_t {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatalf("statfs %s: %v", path, err)
	}
	return st
}

func fsType(t *testing.T, path string) int64 { return statfs(t, path).Type }

func TestPoolOpenCloseReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := testDir(t)
	if ok, err := reflinkSupported(dir); err != nil || ok {
		t.Fatalf("reflinkSupported(%s) = %v, %v; these tests expect a non-reflink temp dir", dir, ok, err)
	}

	p, err := Open(ctx, dir, Options{}, testLogger(t)) // default size
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { p.Close(ctx) })
	if want := filepath.Join(dir, "pool"); p.Path() != want {
		t.Fatalf("Path() = %q, want %q", p.Path(), want)
	}
	if fsType(t, p.Path()) != unix.XFS_SUPER_MAGIC {
		t.Fatalf("pool is not XFS")
	}
	if ok, err := reflinkSupported(p.Path()); err != nil || !ok {
		t.Fatalf("pool does not reflink: %v, %v", ok, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "pool.img"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != DefaultPoolSize || st.Blocks*512 > 1<<30 {
		t.Errorf("pool.img: size %d, allocated %d bytes; want %d, sparse", st.Size, st.Blocks*512, DefaultPoolSize)
	}
	if l := loopLines(t, dir); len(l) != 1 {
		t.Errorf("want one loop device for the pool, got %q", l)
	}
	marker := filepath.Join(p.Path(), "marker")
	if err := os.WriteFile(marker, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}

	// A restarted ptd finds the pool still mounted and reuses it.
	p2, err := Open(ctx, dir, Options{}, testLogger(t))
	if err != nil {
		t.Fatalf("Open of a mounted pool: %v", err)
	}
	if p2.Path() != p.Path() {
		t.Errorf("reopened Path() = %q, want %q", p2.Path(), p.Path())
	}
	if l := loopLines(t, dir); len(l) != 1 {
		t.Errorf("reopening a mounted pool attached another loop device: %q", l)
	}

	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if l := loopLines(t, dir); len(l) != 0 {
		t.Errorf("loop devices after Close: %q", l)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("marker visible after Close (stat: %v): pool still mounted?", err)
	}

	// After a reboot: pool.img exists, nothing mounted.
	p3 := openPool(t, dir, 0)
	if b, err := os.ReadFile(filepath.Join(p3.Path(), "marker")); err != nil || string(b) != "kept" {
		t.Errorf("marker after remount = %q, %v", b, err)
	}
}

func TestPoolOnReflinkDir(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	outer := openPool(t, dir, testPoolSize)
	native := filepath.Join(outer.Path(), "native")
	p := openPool(t, native, 0)
	if p.Path() != native {
		t.Fatalf("Path() = %q, want the reflink-capable dir itself (%q)", p.Path(), native)
	}
	if _, err := os.Stat(filepath.Join(native, "pool.img")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a pool image was made on a reflink dir (stat: %v)", err)
	}
	if _, err := p.CreateImage(context.Background(), "img", 1); err != nil {
		t.Fatalf("CreateImage: %v", err)
	}
}

func TestCreateImage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := openPool(t, testDir(t), testPoolSize)

	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() { _, errs[i] = p.CreateImage(ctx, fmt.Sprint("img", i), 1) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("CreateImage img%d: %v", i, err)
		}
	}
	path := p.ImagePath("img0")
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 1<<30 {
		t.Errorf("image size %d, want 1 GiB", st.Size)
	}
	blanks, err := os.ReadDir(filepath.Join(p.Path(), "blank"))
	if err != nil || len(blanks) != 1 {
		t.Errorf("blank dir holds %v (err %v), want exactly one formatted blank", blanks, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(p.Path(), "tmp")); len(entries) != 0 {
		t.Errorf("tmp dir not empty: %v", entries)
	}

	tests := []struct {
		name   string
		img    string
		sizeGB int
		want   error
	}{
		{"exists", "img0", 1, sandbox.ErrAlreadyExists},
		{"slash", "a/b", 1, sandbox.ErrInvalidArgument},
		{"dot", ".hidden", 1, sandbox.ErrInvalidArgument},
		{"empty", "", 1, sandbox.ErrInvalidArgument},
		{"zero size", "z", 0, sandbox.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := p.CreateImage(ctx, tt.img, tt.sizeGB); !errors.Is(err, tt.want) {
				t.Errorf("CreateImage(%q, %d) = %v, want %v", tt.img, tt.sizeGB, err, tt.want)
			}
		})
	}

	if err := p.MountImage(ctx, "missing", t.TempDir()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("MountImage of a missing image = %v, want ErrNotFound", err)
	}
	for range 2 {
		if err := p.RemoveImage(ctx, "img1"); err != nil {
			t.Errorf("RemoveImage: %v", err)
		}
	}
	if _, err := os.Stat(p.ImagePath("img1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("image still there after RemoveImage: %v", err)
	}
}

// fill writes to path until it fails and returns the bytes written and
// the error.
func fill(path string, limit int64) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := bytes.Repeat([]byte{0xa5}, 1<<20)
	var n int64
	for n < limit {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			return n, err
		}
	}
	return n, f.Sync()
}

func TestQuotaAndOnlineGrow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := testDir(t)
	p := openPool(t, dir, testPoolSize)
	if _, err := p.CreateImage(ctx, "disk", 1); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	mountImage(t, p, "disk", mnt)
	if err := p.MountImage(ctx, "disk", mnt); err != nil {
		t.Errorf("second MountImage at the same place: %v", err)
	}
	if _, err := p.CreateImage(ctx, "other", 1); err != nil {
		t.Fatal(err)
	}
	if err := p.MountImage(ctx, "other", mnt); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("MountImage of another image on a used mountpoint = %v, want ErrConflict", err)
	}

	n, err := fill(filepath.Join(mnt, "big"), 2<<30)
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("writing %d bytes into a 1 GB disk: err = %v, want ENOSPC", n, err)
	}
	if n < 800<<20 || n > 1<<30 {
		t.Errorf("wrote %d MiB before ENOSPC, want roughly 1 GiB", n>>20)
	}
	// The host side: the image file holds no more than its quota.
	var st unix.Stat_t
	if err := unix.Stat(p.ImagePath("disk"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 1<<30 {
		t.Errorf("a full 1 GB disk occupies %d MiB of the pool", st.Blocks*512>>20)
	}
	if err := os.WriteFile(filepath.Join(p.Path(), "still-writable"), []byte("ok"), 0o644); err != nil {
		t.Errorf("pool unusable after a disk filled up: %v", err)
	}

	before := statfs(t, mnt)
	if err := p.GrowImage(ctx, "disk", mnt, 2); err != nil {
		t.Fatalf("GrowImage: %v", err)
	}
	after := statfs(t, mnt)
	grown := int64(after.Blocks-before.Blocks) * after.Bsize
	if grown < 900<<20 {
		t.Errorf("filesystem grew by %d MiB, want about 1 GiB", grown>>20)
	}
	if n, err := fill(filepath.Join(mnt, "more"), 200<<20); err != nil {
		t.Errorf("write after grow failed after %d bytes: %v", n, err)
	}
	if err := p.GrowImage(ctx, "disk", mnt, 1); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("shrinking = %v, want ErrInvalidArgument", err)
	}
	if err := p.GrowImage(ctx, "other", mnt, 3); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("growing an image at another image's mountpoint = %v, want ErrInvalidArgument", err)
	}

	// Offline grow: the unmounted image is mounted briefly.
	if err := p.GrowImage(ctx, "other", "", 2); err != nil {
		t.Fatalf("offline GrowImage: %v", err)
	}
	mnt2 := filepath.Join(t.TempDir(), "mnt2")
	mountImage(t, p, "other", mnt2)
	if st := statfs(t, mnt2); int64(st.Blocks)*st.Bsize < 1900<<20 {
		t.Errorf("offline-grown filesystem is %d MiB, want about 2 GiB", int64(st.Blocks)*st.Bsize>>20)
	}

	for range 2 {
		if err := p.UnmountImage(ctx, mnt); err != nil {
			t.Fatalf("UnmountImage: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(mnt, "big")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file still visible after UnmountImage: %v", err)
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

func TestCloneIsReflink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, mnt := mountedImage(t, "src")

	const size = 200 << 20
	f, err := os.Create(filepath.Join(mnt, "data"))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{1, 2, 3})
	if _, err := io.CopyN(f, rng, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := fileSum(t, filepath.Join(mnt, "data"))

	if err := Freeze(ctx, mnt); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	t.Cleanup(func() { Thaw(ctx, mnt) })
	if err := Freeze(ctx, mnt); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("second Freeze = %v, want ErrConflict", err)
	}
	freeBefore := statfs(t, p.Path()).Bfree
	if err := p.CloneImage(ctx, "src", "dst"); err != nil {
		t.Fatalf("CloneImage: %v", err)
	}
	st := statfs(t, p.Path())
	if copied := int64(freeBefore-st.Bfree) * st.Bsize; copied > 20<<20 {
		t.Errorf("clone used %d MiB of pool space; a reflink copy uses almost none", copied>>20)
	}
	for range 2 {
		if err := Thaw(ctx, mnt); err != nil {
			t.Fatalf("Thaw: %v", err)
		}
	}

	if err := p.CloneImage(ctx, "src", "dst"); !errors.Is(err, sandbox.ErrAlreadyExists) {
		t.Errorf("clone onto an existing image = %v, want ErrAlreadyExists", err)
	}
	if err := p.CloneImage(ctx, "nope", "dst2"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("clone of a missing image = %v, want ErrNotFound", err)
	}

	// The clone mounts alongside its source (same XFS UUID) and holds the
	// same bytes; writes to it do not reach the source.
	mnt2 := filepath.Join(t.TempDir(), "dst")
	mountImage(t, p, "dst", mnt2)
	if got := fileSum(t, filepath.Join(mnt2, "data")); got != want {
		t.Errorf("clone content differs from source")
	}
	if err := os.WriteFile(filepath.Join(mnt2, "data"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := fileSum(t, filepath.Join(mnt, "data")); got != want {
		t.Errorf("writing the clone changed the source")
	}
}

func TestOverlay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := openPool(t, testDir(t), testPoolSize)
	lower := t.TempDir()
	if err := os.WriteFile(filepath.Join(lower, "a.txt"), []byte("from lower"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CreateImage(ctx, "disk", 1); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(t.TempDir(), "disk")
	mountImage(t, p, "disk", disk)
	upper, work := filepath.Join(disk, "upper"), filepath.Join(disk, "work")
	root := filepath.Join(t.TempDir(), "root")
	if err := MountOverlay(ctx, lower, upper, work, root); err != nil {
		t.Fatalf("MountOverlay: %v", err)
	}
	t.Cleanup(func() {
		if err := Unmount(ctx, root); err != nil {
			t.Errorf("Unmount: %v", err)
		}
	})

	if b, err := os.ReadFile(filepath.Join(root, "a.txt")); err != nil || string(b) != "from lower" {
		t.Errorf("lower file through overlay = %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(root, "b.txt"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		path string
		want string // "" = must not exist
	}{
		{filepath.Join(upper, "b.txt"), "new"},
		{filepath.Join(upper, "a.txt"), "changed"},
		{filepath.Join(lower, "a.txt"), "from lower"},
		{filepath.Join(lower, "b.txt"), ""},
	}
	for _, c := range checks {
		b, err := os.ReadFile(c.path)
		switch {
		case c.want == "" && !errors.Is(err, os.ErrNotExist):
			t.Errorf("%s exists (%q, %v), want absent", c.path, b, err)
		case c.want != "" && (err != nil || string(b) != c.want):
			t.Errorf("%s = %q, %v; want %q", c.path, b, err, c.want)
		}
	}

	for range 2 {
		if err := Unmount(ctx, root); err != nil {
			t.Fatalf("Unmount: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("overlay still mounted after Unmount: %v", err)
	}
	if err := Unmount(ctx, filepath.Join(root, "does-not-exist")); err != nil {
		t.Errorf("Unmount of a missing path: %v", err)
	}
	if err := MountOverlay(ctx, "", upper, work, root); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("MountOverlay without lower = %v, want ErrInvalidArgument", err)
	}
}

func TestUnmountBusyFallsBackToLazy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, mnt := mountedImage(t, "disk")
	f, err := os.Create(filepath.Join(mnt, "open"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.UnmountImage(ctx, mnt); err != nil {
		f.Close()
		t.Fatalf("UnmountImage of a busy image: %v", err)
	}
	if _, ok, _ := findMount(mnt); ok {
		t.Errorf("%s still mounted after a lazy unmount", mnt)
	}
	// Closing the last user frees the filesystem and, with it, the loop
	// device (checked by testDir's cleanup).
	f.Close()
}

// BenchmarkImageLifecycle reports the cost of each step a sandbox disk
// goes through (create from the blank, mount, grow, freeze+clone, unmount).
func BenchmarkImageLifecycle(b *testing.B) {
	testenv.RequiresRoot(b)
	ctx := context.Background()
	dir := b.TempDir()
	p, err := Open(ctx, dir, Options{PoolSizeBytes: testPoolSize}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(ctx) })
	if _, err := p.CreateImage(ctx, "warm", 1); err != nil { // formats the blank
		b.Fatal(err)
	}
	mnt := filepath.Join(dir, "mnt")
	var create, mount, grow, clone, umount, remove time.Duration
	step := func(d *time.Duration, f func() error) {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*d += time.Since(t0)
	}
	for i := 0; b.Loop(); i++ {
		name, cl := fmt.Sprint("img", i), fmt.Sprint("clone", i)
		step(&create, func() error { _, err := p.CreateImage(ctx, name, 1); return err })
		step(&mount, func() error { return p.MountImage(ctx, name, mnt) })
		step(&grow, func() error { return p.GrowImage(ctx, name, mnt, 2) })
		step(&clone, func() error {
			if err := Freeze(ctx, mnt); err != nil {
				return err
			}
			defer Thaw(ctx, mnt)
			return p.CloneImage(ctx, name, cl)
		})
		step(&umount, func() error { return p.UnmountImage(ctx, mnt) })
		step(&remove, func() error {
			if err := p.RemoveImage(ctx, name); err != nil {
				return err
			}
			return p.RemoveImage(ctx, cl)
		})
	}
	for _, m := range []struct {
		d    time.Duration
		unit string
	}{{create, "create-ms"}, {mount, "mount-ms"}, {grow, "grow-ms"}, {clone, "freeze+clone-ms"}, {umount, "unmount-ms"}, {remove, "remove2-ms"}} {
		b.ReportMetric(float64(m.d.Microseconds())/float64(b.N)/1000, m.unit)
	}
}

func TestOpenSweepsStaleTemporaries(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	p := openPool(t, dir, testPoolSize)
	tmp := filepath.Join(p.Path(), "tmp")
	old, fresh := filepath.Join(tmp, "clone-old"), filepath.Join(tmp, "clone-fresh")
	for _, f := range []string{old, fresh} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stale := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, stale, stale); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), dir, Options{PoolSizeBytes: testPoolSize}, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary survived Open: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temporary removed by Open: %v", err)
	}
}
