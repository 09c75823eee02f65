package controlplane

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/archive"
	"github.com/platinum-dev/platinum/internal/objstore"
	objfs "github.com/platinum-dev/platinum/internal/objstore/fs"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// importHost is a snapHost that takes checkpoint images from other hosts
// into dir/<sandbox>, the way the real host does: only a fill that
// succeeds leaves an image.
type importHost struct {
	*snapHost
	dir string
}

func (h *importHost) ImportCheckpoint(ctx context.Context, id, class string, fill func(ctx context.Context, dir string) error) error {
	part := filepath.Join(h.dir, id+".partial")
	if err := os.MkdirAll(part, 0o700); err != nil {
		return err
	}
	if err := fill(ctx, part); err != nil {
		os.RemoveAll(part)
		return err
	}
	return os.Rename(part, filepath.Join(h.dir, id))
}

// TestStopSnapshotMemoryRoundTrip: a stop snapshot's memory image goes to
// the object store file by file with an index, comes back byte for byte as
// the sandbox's checkpoint on the host that starts it, is refused (with
// the reason, and no image left) when it cannot be used, and its objects
// are listed for the deletion ledger and go with the backup.
func TestStopSnapshotMemoryRoundTrip(t *testing.T) {
	ctx := context.Background()
	objs, err := objfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &importHost{snapHost: &snapHost{fakeHost: &fakeHost{}}, dir: t.TempDir()}
	s, _ := newServiceWith(t, h, "", func(c *Config) { c.Objects = objs })
	if err := objs.EnsureBucket(ctx, s.cfg.ArchiveBucket); err != nil {
		t.Fatal(err)
	}

	img := t.TempDir()
	files := map[string][]byte{
		"checkpoint.img": bytes.Repeat([]byte("kernel state "), 50000),
		"pages.img":      append(make([]byte, 3<<20), bytes.Repeat([]byte("page"), 4096)...),
		"pages_meta.img": []byte("meta"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(img, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := sandbox.SnapshotSource{Runtime: "gvisor", CPU: 1, RAMMB: 512}
	stoppedAt := time.Now().UTC().Add(-time.Minute)
	snap := sandbox.Snapshot{ID: sandbox.NewID(sandbox.PrefixBackup), Name: StopSnapshotName, Kind: sandbox.KindBackup, Memory: true,
		Source: src, Bucket: s.cfg.ArchiveBucket, ManifestKey: "manifests/none.json", CreatedAt: stoppedAt.Add(time.Second)}
	if _, err := s.uploadMemory(ctx, snap, img); err != nil {
		t.Fatal(err)
	}
	idx, err := s.readMemoryIndex(ctx, snap)
	if err != nil || len(idx.Files) != len(files) || idx.Class != "gvisor" {
		t.Fatalf("memory index: %+v %v", idx, err)
	}

	sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), Runtime: "gvisor", CPU: 1, RAMMB: 512, StoppedAt: &stoppedAt}
	tests := []struct {
		name string
		sb   func(sandbox.Sandbox) sandbox.Sandbox
		snap func(sandbox.Snapshot) sandbox.Snapshot
		want string // "" restores, unless noImage
		// noImage: the memory does not apply, so nothing is said or made.
		noImage bool
	}{
		{name: "restores", want: ""},
		{name: "other class", sb: func(x sandbox.Sandbox) sandbox.Sandbox { x.Runtime = "runc"; return x }, want: "runtime class gvisor, the sandbox runs runc"},
		{name: "resized", sb: func(x sandbox.Sandbox) sandbox.Sandbox { x.RAMMB = 1024; return x }, want: "the sandbox is now 1 / 1024"},
		{name: "index gone", snap: func(x sandbox.Snapshot) sandbox.Snapshot { x.ID = sandbox.NewID(sandbox.PrefixBackup); return x }, want: "could not be fetched"},
		{name: "disk only", snap: func(x sandbox.Snapshot) sandbox.Snapshot { x.Memory = false; return x }, noImage: true},
		{name: "an earlier stop's", sb: func(x sandbox.Sandbox) sandbox.Sandbox {
			later := stoppedAt.Add(time.Hour)
			x.StoppedAt = &later
			return x
		}, noImage: true},
		{name: "running (a lost host's recovery)", sb: func(x sandbox.Sandbox) sandbox.Sandbox { x.StoppedAt = nil; return x }, noImage: true},
		{name: "a user backup", snap: func(x sandbox.Snapshot) sandbox.Snapshot { x.Name = "mine"; return x }, noImage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, bk := sb, snap
			x.ID = sandbox.NewID(sandbox.PrefixSandbox)
			if tt.sb != nil {
				x = tt.sb(x)
			}
			if tt.snap != nil {
				bk = tt.snap(bk)
			}
			why := s.importStopMemory(ctx, x, bk)
			if applies := stopMemoryApplies(x, bk); applies == tt.noImage {
				t.Fatalf("stopMemoryApplies = %v, want %v", applies, !tt.noImage)
			}
			if tt.want == "" && why != "" || tt.want != "" && !strings.Contains(why, tt.want) {
				t.Fatalf("import: %q, want %q", why, tt.want)
			}
			got, _ := os.ReadDir(filepath.Join(h.dir, x.ID))
			switch {
			case tt.want != "" || tt.noImage:
				if len(got) != 0 {
					t.Fatalf("an image was left: %v", got)
				}
			default:
				for name, b := range files {
					if back, err := os.ReadFile(filepath.Join(h.dir, x.ID, name)); err != nil || !bytes.Equal(back, b) {
						t.Fatalf("%s came back different (%d bytes, %v)", name, len(back), err)
					}
				}
			}
		})
	}

	if refs := s.memoryObjects(ctx, snap); len(refs) != len(files)+1 || refs[len(files)].Key != memoryIndexKey(snap.ID) {
		t.Fatalf("the memory objects for the deletion ledger: %+v, want %d manifests and the index", refs, len(files))
	}
	if err := s.deleteBackupObjects(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if _, err := s.readMemoryIndex(ctx, snap); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("memory index after the delete: %v", err)
	}
	for _, f := range idx.Files {
		if _, err := archive.ReadManifest(ctx, objs, s.cfg.ArchiveBucket, f.ManifestKey); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("memory manifest %s after the delete: %v", f.ManifestKey, err)
		}
	}
}
