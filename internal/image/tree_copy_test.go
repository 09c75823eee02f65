package image

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/platinum-dev/platinum/internal/image/imagetest"
)

// TestTreeCopy: a flattened root filesystem written by WriteTree and
// unpacked by UnpackTree elsewhere is the same tree (ownership, modes,
// hard links, symlinks, what whiteouts removed), and a dest that is there
// already is refused without being touched.
func TestTreeCopy(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.Registry(t, nil)
	ref := reg + "/team/app:v1"
	imagetest.Push(t, ref, testImage(t))
	s := newStore(t)
	img, err := s.Pull(ctx, ref, Auth{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "rootfs")
	if err := s.Flatten(ctx, src, "", img.Layers); err != nil {
		t.Fatal(err)
	}
	var tarball bytes.Buffer
	if err := WriteTree(ctx, src, &tarball); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "copy", "rootfs")
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := UnpackTree(ctx, bytes.NewReader(tarball.Bytes()), dest); err != nil {
		t.Fatal(err)
	}
	checkRootfs(t, dest)
	if got, want := Size(dest), Size(src); got != want {
		t.Errorf("copy holds %d bytes, the original %d", got, want)
	}
	if err := UnpackTree(ctx, bytes.NewReader(tarball.Bytes()), dest); err == nil {
		t.Error("unpacking over a complete copy succeeded")
	}
	checkRootfs(t, dest)
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dest), ".rootfs.unpack-*"))
	if len(left) != 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}
