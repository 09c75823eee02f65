package disk

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitSpares waits until the pool holds n ready spares of sizeGB.
func waitSpares(t *testing.T, p *Pool, sizeGB, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p.spareMu.Lock()
		got := len(p.spares[sizeGB])
		p.spareMu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spares of %d GB: have %d, want %d", sizeGB, got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// takeSpareA has p keep one 1 GB spare with the prepared dirs, waits for
// it, and takes it as image "a" mounted at dir/a-disk (unmounted at
// cleanup), which must be XFS; what names the take in a failure. It
// returns the mount point.
func takeSpareA(t *testing.T, p *Pool, dir string, prepared []string, what string) string {
	t.Helper()
	ctx := context.Background()
	if err := p.EnableSpares(ctx, 1, prepared, 1); err != nil {
		t.Fatalf("EnableSpares: %v", err)
	}
	waitSpares(t, p, 1, 1)
	mnt := filepath.Join(dir, "a-disk")
	took, err := p.TakeSpare(ctx, "a", 1, mnt)
	if err != nil || !took {
		t.Fatalf("%s = %v, %v; want true", what, took, err)
	}
	t.Cleanup(func() { p.UnmountImage(ctx, mnt) })
	if fsType(t, mnt) != unix.XFS_SUPER_MAGIC {
		t.Fatalf("%s is not XFS", mnt)
	}
	return mnt
}

func TestSpareDisks(t *testing.T) {
	ctx := context.Background()
	dir := testDir(t)
	p := openPool(t, dir, 2<<30)
	// A taken spare is image "a", mounted where asked, backed by a's file.
	mnt := takeSpareA(t, p, dir, []string{"upper/etc", "work"}, "TakeSpare")
	m, ok, err := findMount(mnt)
	if err != nil || !ok {
		t.Fatalf("findMount %s: %v %v", mnt, ok, err)
	}
	if b, _ := loopBackingFile(m.source); b != p.ImagePath("a") {
		t.Fatalf("backing file of the taken spare = %q, want %q", b, p.ImagePath("a"))
	}
	// Mounting a where it is is the usual no-op, so a restart's start
	// path treats a taken spare like any mounted disk.
	if err := p.MountImage(ctx, "a", mnt); err != nil {
		t.Fatalf("MountImage over the taken spare: %v", err)
	}
	if st := statfs(t, mnt); int64(st.Blocks)*st.Bsize < 900<<20 {
		t.Fatalf("taken spare has %d bytes, want about 1 GiB", int64(st.Blocks)*st.Bsize)
	}
	if fi, err := os.Stat(filepath.Join(mnt, "upper/etc")); err != nil || !fi.IsDir() {
		t.Fatalf("the spare's prepared dir upper/etc: %v", err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An existing image is never replaced by a spare.
	waitSpares(t, p, 1, 1)
	if took, err := p.TakeSpare(ctx, "a", 1, filepath.Join(dir, "other")); took || err != nil {
		t.Fatalf("TakeSpare over an existing image = %v, %v; want false, nil", took, err)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "x" {
		t.Fatalf("a's file after a refused take: %q %v", b, err)
	}

	// A size not asked for yet has no spare; asking makes one.
	if took, err := p.TakeSpare(ctx, "b", 2, filepath.Join(dir, "b-disk")); took || err != nil {
		t.Fatalf("TakeSpare of a new size = %v, %v; want false, nil", took, err)
	}
	waitSpares(t, p, 2, 1)

	// A restarted ptd (another Pool on the same dir) drops the spares the
	// first left mounted; Close (via openPool's cleanup and testDir) then
	// finds no loop device or mount left.
	p2, err := Open(ctx, dir, Options{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	p.spareMu.Lock()
	p.spareStop = true // the "dead" process makes no more
	p.spareMu.Unlock()
	p.spareWG.Wait()
	if err := p2.EnableSpares(ctx, 0, nil); err != nil {
		t.Fatalf("EnableSpares on restart: %v", err)
	}
	for _, l := range loopLines(t, dir) {
		if strings.Contains(l, "/spare/") {
			t.Errorf("spare still attached after a restart's sweep: %s", l)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(p.Path(), "spare")); len(ents) != 0 {
		t.Errorf("spare images left after a restart's sweep: %d", len(ents))
	}
}

// On a host whose reflink data dir sits under a shared mount (systemd's
// default), spares still move: EnableSpares binds spare-mnt privately, and
// Close leaves no mount behind (testDir checks).
func TestSpareDisksUnderSharedMount(t *testing.T) {
	dir := testDir(t)
	outer := openPool(t, dir, 2<<30)
	if err := unix.Mount("", outer.Path(), "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("make the outer pool shared: %v", err)
	}
	native := filepath.Join(outer.Path(), "native")
	p := openPool(t, native, 0)
	if p.loopMounted {
		t.Fatal("the pool on a reflink dir is loop-mounted")
	}
	takeSpareA(t, p, dir, nil, "TakeSpare under a shared mount")
}
