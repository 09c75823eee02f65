package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/platinum-dev/platinum/internal/image/imagetest"
	"golang.org/x/sys/unix"
)

func TestImportTarballs(t *testing.T) {
	img := testImage(t)
	want, _ := img.Digest()
	tag, _ := name.NewTag("example.com/app:v1")

	var docker bytes.Buffer
	if err := tarball.Write(tag, img, &docker); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	oci := tarDir(t, dir)

	for _, tc := range []struct {
		name string
		tar  []byte
	}{{"docker save", docker.Bytes()}, {"OCI layout", oci}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			got, err := s.Import(context.Background(), bytes.NewReader(tc.tar), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "OCI layout" && got.Digest != want.String() {
				t.Errorf("digest %s, want %s", got.Digest, want)
			}
			if got.Settings.WorkingDir != "/srv" || len(got.Layers) != 3 {
				t.Errorf("imported %+v", got)
			}
			dest := filepath.Join(t.TempDir(), "rootfs")
			if err := s.Flatten(context.Background(), dest, "", got.Layers); err != nil {
				t.Fatal(err)
			}
			checkRootfs(t, dest)
		})
	}
	t.Run("neither format", func(t *testing.T) {
		s := newStore(t)
		_, err := s.Import(context.Background(), bytes.NewReader(tarDir(t, t.TempDir())), nil)
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("import = %v, want ErrInvalid", err)
		}
	})
}

// tarDir packs dir's regular files and directories.
func tarDir(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if err != nil || rel == "." || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		tw.Write(b)
		return nil
	})
	tw.Close()
	return buf.Bytes()
}

// TestImportDirMatchesOverlay changes files through a real overlay mount,
// stores its upper dir as a layer and checks that flattening the base plus
// that layer gives what the overlay showed.
func TestImportDirMatchesOverlay(t *testing.T) {
	bb := busyboxDir(t)
	s := newStore(t)
	base, err := s.storeLayer(context.Background(), bytes.NewReader(layerTar(t, imagetest.DirLayer(t, bb))), "", &budget{left: 1 << 30}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lower := filepath.Join(t.TempDir(), "lower")
	if err := s.Flatten(context.Background(), lower, "", []string{base}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	upper, wdir, merged := filepath.Join(work, "upper"), filepath.Join(work, "work"), filepath.Join(work, "merged")
	for _, d := range []string{upper, wdir, merged} {
		os.Mkdir(d, 0o755)
	}
	mount := func() {
		if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+wdir); err != nil {
			t.Fatal(err)
		}
	}
	mount()
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })
	script := `set -e
rm /etc/os-release
rm -rf /home && mkdir /home && echo z > /home/z
mkdir -p /data && echo f > /data/f && ln /data/f /data/g && ln -s /nowhere /data/s
chown 1000:1000 /data/f && chmod 4750 /data/f
echo changed > /etc/hostname
mkdir -p /.pt && echo agent > /.pt/pt-agent`
	if out, err := exec.Command("chroot", merged, "/bin/sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("chroot: %v: %s", err, out)
	}
	if err := unix.Setxattr(filepath.Join(merged, "data/f"), "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	want := listing(t, merged, ".pt", "etc/hostname")
	unix.Unmount(merged, 0)

	diff, err := s.ImportDir(context.Background(), upper, []string{".pt", "etc/hostname"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.ImportDir(context.Background(), upper, []string{".pt", "etc/hostname"})
	if err != nil || again != diff {
		t.Errorf("a second import of the same dir = %s, %v; want %s", again, err, diff)
	}
	flat := filepath.Join(t.TempDir(), "rootfs")
	if err := s.Flatten(context.Background(), flat, "", []string{base, diff}); err != nil {
		t.Fatal(err)
	}
	got := listing(t, flat, ".pt", "etc/hostname")
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("flattened tree differs from the overlay's view (-overlay +flattened):\n%s", d)
	}
	var f, g unix.Stat_t
	unix.Lstat(filepath.Join(flat, "data/f"), &f)
	unix.Lstat(filepath.Join(flat, "data/g"), &g)
	if f.Ino != g.Ino {
		t.Error("the hard link made in the overlay is two files after import")
	}
	if b, _ := os.ReadFile(filepath.Join(flat, "etc/hostname")); string(b) == "changed\n" {
		t.Error("an excluded path was imported")
	}
	// The same stack on top of a plain base directory gives the same tree.
	flat2 := filepath.Join(t.TempDir(), "rootfs")
	if err := s.Flatten(context.Background(), flat2, lower, []string{diff}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, listing(t, flat2, ".pt", "etc/hostname")); d != "" {
		t.Errorf("flatten over a base dir (-overlay +flattened):\n%s", d)
	}
}

// layerTar reads a layer's uncompressed tar.
func layerTar(t *testing.T, l v1.Layer) []byte {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// listing describes every entry under root (type, mode, owner, size,
// link target, content of small files, kept xattrs), skipping the given
// paths.
func listing(t *testing.T, root string, skip ...string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		for _, s := range skip {
			if rel == s {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		var st unix.Stat_t
		unix.Lstat(p, &st)
		line := fmt.Sprintf("%s %o %d:%d", rel, st.Mode, st.Uid, st.Gid)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case d.Type().IsRegular():
			line += fmt.Sprintf(" %d", st.Size)
			if st.Size < 64 {
				b, _ := os.ReadFile(p)
				line += " " + strings.TrimSpace(string(b))
			}
		}
		if xs, _ := xattrs(p); len(xs) > 0 {
			keys := make([]string, 0, len(xs))
			for k, v := range xs {
				keys = append(keys, k+"="+string(v))
			}
			sort.Strings(keys)
			line += " " + strings.Join(keys, ",")
		}
		out = append(out, line)
		return nil
	})
	return out
}
