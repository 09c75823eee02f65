// Package imagetest builds OCI images for tests and serves them from a
// registry on loopback, so no test reaches an outside registry: the image
// package's own tests and the end-to-end template tests share it.
package imagetest

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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
)

// Entry is one tar entry of a test layer. A zero Type is a regular file;
// a zero Mode is 0644 (0755 for a directory).
type Entry struct {
	Name, Body, Link string
	Type             byte
	Mode             int64
	UID, GID         int
	PAX              map[string]string
}

// Layer makes a gzip layer from entries (a character device is 1:3,
// /dev/null's numbers).
func Layer(t testing.TB, entries ...Entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.Mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		hdr := &tar.Header{Name: e.Name, Typeflag: typ, Mode: mode, Uid: e.UID, Gid: e.GID, Linkname: e.Link,
			ModTime: time.Unix(1700000000, 0), PAXRecords: e.PAX, Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.Body))
		}
		if typ == tar.TypeChar {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			tw.Write([]byte(e.Body))
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

// DirLayer makes a layer of every directory, symlink and regular file
// under dir, with their modes and owners.
func DirLayer(t testing.TB, dir string) v1.Layer {
	t.Helper()
	var es []Entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		e := Entry{Name: rel, Mode: int64(st.Mode & 0o7777), UID: int(st.Uid), GID: int(st.Gid)}
		switch {
		case d.IsDir():
			e.Type = tar.TypeDir
		case d.Type()&fs.ModeSymlink != 0:
			e.Type = tar.TypeSymlink
			e.Link, _ = os.Readlink(p)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Body = string(b)
		default:
			return nil
		}
		es = append(es, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return Layer(t, es...)
}

// Image stacks layers on an empty linux/amd64 image with cfg.
func Image(t testing.TB, cfg v1.Config, layers ...v1.Layer) v1.Image {
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
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// Registry serves an in-memory OCI registry on loopback until the test
// ends and returns its host:port; wrap, when set, sits in front of it
// (auth, faults).
func Registry(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Push writes img to ref.
func Push(t testing.TB, ref string, img v1.Image, opts ...remote.Option) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		t.Fatal(err)
	}
}
