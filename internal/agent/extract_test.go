package agent_test

import (
	"archive/tar"
	"bytes"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/testenv"
)

// postTar sends a tar to POST /files/tar.
func (e *env) postTar(t *testing.T, dir, owner string, entries []tar.Header, data map[string]string) (int, string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		h.Size = int64(len(data[h.Name]))
		if h.ModTime.IsZero() {
			h.ModTime = time.Unix(1700000000, 0)
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(data[h.Name]))
	}
	tw.Close()
	q := url.Values{"path": {dir}}
	if owner != "" {
		q.Set("owner", owner)
	}
	req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/files/tar?"+q.Encode(), &buf)
	req.Header.Set("X-Access-Token", testToken)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func TestExtractTar(t *testing.T) {
	testenv.RequiresRoot(t)
	e := newEnv(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "old"), []byte("old"), 0o644)
	code, body := e.postTar(t, dir, "", []tar.Header{
		{Name: "a/b/", Typeflag: tar.TypeDir, Mode: 0o750, Uid: 7, Gid: 8},
		{Name: "a/b/file", Typeflag: tar.TypeReg, Mode: 0o4755, Uid: 7, Gid: 8},
		{Name: "a/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		{Name: "a/hard", Typeflag: tar.TypeLink, Linkname: "a/b/file"},
		{Name: "old", Typeflag: tar.TypeReg, Mode: 0o600},
		{Name: "deep/er/x", Typeflag: tar.TypeReg, Mode: 0o644},
	}, map[string]string{"a/b/file": "content", "old": "new"})
	if code != 200 || !strings.Contains(body, `"files":6`) {
		t.Fatalf("extract = %d %s", code, body)
	}
	st := func(p string) *syscall.Stat_t {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t)
	}
	if s := st("a/b/file"); s.Uid != 7 || s.Gid != 8 || s.Mode&0o7777 != 0o4755 {
		t.Errorf("a/b/file: uid %d gid %d mode %o", s.Uid, s.Gid, s.Mode&0o7777)
	}
	if s := st("a/b"); s.Mode&0o7777 != 0o750 || s.Uid != 7 {
		t.Errorf("a/b: mode %o uid %d", s.Mode&0o7777, s.Uid)
	}
	if st("a/hard").Ino != st("a/b/file").Ino {
		t.Error("hard link is a copy")
	}
	if l, _ := os.Readlink(filepath.Join(dir, "a/link")); l != "/etc/passwd" {
		t.Errorf("link → %q", l)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "old")); string(b) != "new" {
		t.Errorf("old = %q, want replaced", b)
	}
	if s := st("deep/er"); s.Mode&0o777 != 0o755 {
		t.Errorf("made parent mode %o", s.Mode&0o777)
	}

	// owner applies to every entry and made directory.
	code, body = e.postTar(t, dir, "1234:99", []tar.Header{{Name: "o/f", Typeflag: tar.TypeReg, Mode: 0o644}}, nil)
	if code != 200 {
		t.Fatalf("extract with owner = %d %s", code, body)
	}
	if s := st("o/f"); s.Uid != 1234 || s.Gid != 99 {
		t.Errorf("o/f owner %d:%d", s.Uid, s.Gid)
	}
	if s := st("o"); s.Uid != 1234 {
		t.Errorf("made dir o owner %d", s.Uid)
	}

	for _, tc := range []struct {
		name, dir, owner string
		entries          []tar.Header
	}{
		{"climbing name", dir, "", []tar.Header{{Name: "../escape", Typeflag: tar.TypeReg}}},
		{"relative dir", "rel", "", nil},
		{"unknown owner", dir, "no-such-user", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := e.postTar(t, tc.dir, tc.owner, tc.entries, nil); code != 400 {
				t.Errorf("extract = %d %s, want 400", code, body)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
		t.Error("a climbing entry was written")
	}
}
