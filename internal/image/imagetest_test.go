package image

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/platinum-dev/platinum/internal/template"
	"github.com/platinum-dev/platinum/internal/testenv"
)

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
