package image

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/template"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// entry is one tar entry of a test layer.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
	uid, gid         int
	pax              map[string]string
}

// layerOf makes a gzip layer from entries.
func layerOf(t *testing.T, entries ...entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Uid: e.uid, Gid: e.gid, Linkname: e.link,
			Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0), PAXRecords: e.pax, Format: tar.FormatPAX}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if typ == tar.TypeChar {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// dirLayer makes a layer of every file under dir.
func dirLayer(t *testing.T, dir string) v1.Layer {
	t.Helper()
	var es []entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		e := entry{name: rel, mode: int64(st.Mode & 0o7777), uid: int(st.Uid), gid: int(st.Gid)}
		switch {
		case d.IsDir():
			e.typ = tar.TypeDir
		case d.Type()&fs.ModeSymlink != 0:
			e.typ = tar.TypeSymlink
			e.link, _ = os.Readlink(p)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.body = string(b)
		default:
			return nil
		}
		es = append(es, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return layerOf(t, es...)
}

// busyboxDir builds the busybox template rootfs the tests turn into images.
func busyboxDir(t *testing.T) string {
	t.Helper()
	testenv.RequiresRoot(t)
	dir := filepath.Join(t.TempDir(), "busybox")
	if err := template.BuildBusybox(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// imageOf stacks layers on an empty linux/amd64 image with cfg.
func imageOf(t *testing.T, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", "amd64", cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// testRegistry serves an in-memory OCI registry on loopback; wrap, when
// set, sits in front of it (auth, faults).
func testRegistry(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// push writes img to ref, with basic credentials when user is set.
func push(t *testing.T, ref string, img v1.Image, opts ...remote.Option) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		t.Fatal(err)
	}
}

// newStore opens a store on a fresh directory that may reach loopback.
func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(Config{Root: filepath.Join(t.TempDir(), "layers"), AllowPrivate: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// blobFault wraps a registry so that layer blob GETs go through f.
func blobFault(f func(w http.ResponseWriter, r *http.Request, next http.Handler) bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/sha256:") && f(w, r, next) {
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// corrupting flips one byte of every blob body larger than 1 KiB (layers,
// not configs).
type corrupting struct {
	http.ResponseWriter
	n atomic.Int64
}

func (c *corrupting) Write(b []byte) (int, error) {
	off := c.n.Load()
	c.n.Add(int64(len(b)))
	if off <= 600 && off+int64(len(b)) > 600 {
		b = bytes.Clone(b)
		b[600-off] ^= 0xff
	}
	return c.ResponseWriter.Write(b)
}
