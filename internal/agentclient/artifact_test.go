package agentclient_test

import (
	"archive/tar"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

func TestArtifact(t *testing.T) {
	c := agentclient.New(startAgent(t), token, nil)
	ctx := testCtx(t)
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "d", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "d", "a.txt"), []byte("alpha"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "d", "sub", "b.txt"), []byte("beta"), 0o600))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "d", "out")))
	must(os.Symlink(filepath.Join(dir, "d"), filepath.Join(dir, "dlink")))

	rc, isDir, err := c.Artifact(ctx, filepath.Join(dir, "d", "a.txt"))
	must(err)
	b, _ := io.ReadAll(rc)
	rc.Close()
	if isDir || string(b) != "alpha" {
		t.Errorf("file: dir=%v %q", isDir, b)
	}

	for _, p := range []string{filepath.Join(dir, "d"), filepath.Join(dir, "dlink")} {
		rc, isDir, err = c.Artifact(ctx, p)
		must(err)
		got := map[string]string{}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			must(err)
			body, _ := io.ReadAll(tr)
			got[h.Name] = string(body) + h.Linkname
		}
		rc.Close()
		want := map[string]string{"a.txt": "alpha", "sub/": "", "sub/b.txt": "beta", "out": "/etc/passwd"}
		if diff := cmp.Diff(want, got); !isDir || diff != "" {
			t.Errorf("%s: dir=%v, entries (-want +got):\n%s", p, isDir, diff)
		}
	}

	for _, tc := range []struct {
		path string
		want error
	}{
		{filepath.Join(dir, "nope"), sandbox.ErrNotFound},
		{dir + "/d/../d/a.txt", sandbox.ErrInvalidArgument},
		{"", sandbox.ErrInvalidArgument},
	} {
		if _, _, err := c.Artifact(ctx, tc.path); !errors.Is(err, tc.want) {
			t.Errorf("%q: %v, want %v", tc.path, err, tc.want)
		}
	}
}

// TestArtifactOldAgent checks that an agent without the route reads as
// unavailable, not as a missing path.
func TestArtifactOldAgent(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, _, err := agentclient.New(srv.URL, token, nil).Artifact(testCtx(t), "/x")
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("err = %v, want unavailable", err)
	}
}
