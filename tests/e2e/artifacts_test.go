package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type artifactJSON struct {
	ID          string `json:"id"`
	SandboxID   string `json:"sandbox_id"`
	Name        string `json:"name"`
	Path        string `json:"path"`
	Kind        string `json:"kind"`
	ContentType string `json:"content_type"`
	SizeBytes   int64  `json:"size_bytes"`
	SHA256      string `json:"sha256"`
}

// TestArtifacts exports a file and a directory from a sandbox, deletes
// the sandbox, and gets both back byte for byte.
func TestArtifacts(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	id := c.create(map[string]any{"template": "busybox"})

	blob := make([]byte, 3<<20+17)
	rand.Read(blob)
	if r := c.do("PUT", "/v1/sandboxes/"+id+"/files?path=/work/out/blob.bin", blob); r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	c.mustSh(id, `set -e
mkdir -p /work/out/sub/deeper /work/out/empty
printf 'hello\n' > /work/out/a.txt
printf 'nested' > /work/out/sub/deeper/b.txt
chmod 0750 /work/out/sub/deeper/b.txt
ln -s ../a.txt /work/out/sub/link
ln -s /etc/passwd /work/out/abs-link
mkfifo /work/out/fifo`)

	create := func(body map[string]any) artifactJSON {
		t.Helper()
		r := c.do("POST", "/v1/sandboxes/"+id+"/artifacts", body)
		if r.Status != 201 {
			t.Fatalf("create artifact %v: %d %s", body, r.Status, r.Body)
		}
		var a artifactJSON
		json.Unmarshal(r.Body, &a)
		return a
	}
	file := create(map[string]any{"path": "/work/out/blob.bin"})
	dir := create(map[string]any{"path": "/work/out", "name": "results.tar"})
	text := create(map[string]any{"path": "/work/out/a.txt"})
	sum := sha256.Sum256(blob)
	if file.Kind != "file" || file.Name != "blob.bin" || file.SizeBytes != int64(len(blob)) || file.SHA256 != hex.EncodeToString(sum[:]) ||
		file.SandboxID != id || file.ContentType != "application/octet-stream" {
		t.Errorf("file artifact = %+v", file)
	}
	if dir.Kind != "directory" || dir.Name != "results.tar" || dir.ContentType != "application/x-tar" {
		t.Errorf("directory artifact = %+v", dir)
	}
	if !strings.HasPrefix(text.ContentType, "text/plain") {
		t.Errorf("a.txt content type %q", text.ContentType)
	}

	// Bad requests change nothing.
	for _, tc := range []struct {
		body  string
		field string
		code  int
	}{
		{`{"path":"/work/../etc/passwd"}`, "path", 400},
		{`{"path":""}`, "path", 400},
		{`{"path":"/work/out/a.txt","name":"../x"}`, "name", 400},
		{`{"path":"/work/out/a.txt","bogus":1}`, "bogus", 400},
		{`{"path":"/no/such/file"}`, "", 404},
		{`{"path":"/work/out/fifo"}`, "", 400},
	} {
		r := c.do("POST", "/v1/sandboxes/"+id+"/artifacts", tc.body)
		if r.Status != tc.code || (tc.field != "" && r.JSON()["field"] != tc.field) {
			t.Errorf("%s: %d %s", tc.body, r.Status, r.Body)
		}
	}
	if r := c.do("GET", "/v1/artifacts?sandbox_id="+id, nil); strings.Count(string(r.Body), `"id"`) != 3 {
		t.Errorf("list after refused creates: %s", r.Body)
	}

	// The sandbox goes away; the artifacts stay.
	if r := c.do("DELETE", "/v1/sandboxes/"+id, nil); r.Status != 202 {
		t.Fatalf("delete sandbox: %d %s", r.Status, r.Body)
	}
	for i := 0; i < 600; i++ {
		if r := c.do("GET", "/v1/sandboxes/"+id, nil); r.Status == 404 || r.JSON()["state"] == "deleted" {
			break
		}
		sleep(100)
	}

	r := c.do("GET", "/v1/artifacts/"+file.ID+"/content", nil)
	if r.Status != 200 || !bytes.Equal(r.Body, blob) {
		t.Fatalf("file content: %d, %d bytes, equal %v", r.Status, len(r.Body), bytes.Equal(r.Body, blob))
	}
	if _, params, _ := mime.ParseMediaType(r.Header.Get("Content-Disposition")); params["filename"] != "blob.bin" {
		t.Errorf("Content-Disposition %q", r.Header.Get("Content-Disposition"))
	}

	r = c.do("GET", "/v1/artifacts/"+dir.ID+"/content", nil)
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("dir content: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	type entry struct {
		Type byte
		Mode int64
		Link string
		Body string
	}
	got := map[string]entry{}
	tr := tar.NewReader(bytes.NewReader(r.Body))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		b, _ := io.ReadAll(tr)
		e := entry{Type: h.Typeflag, Link: h.Linkname}
		if h.Typeflag == tar.TypeReg {
			e.Mode = h.Mode & 0o777
			e.Body = string(b)
			if h.Name == "blob.bin" {
				if !bytes.Equal(b, blob) {
					t.Error("blob.bin in the tar differs")
				}
				e.Body, e.Mode = "<blob>", 0 // the agent's upload mode is not under test
			}
		}
		got[h.Name] = e
	}
	want := map[string]entry{
		"blob.bin":         {Type: tar.TypeReg, Body: "<blob>"},
		"a.txt":            {Type: tar.TypeReg, Mode: 0o644, Body: "hello\n"},
		"sub/":             {Type: tar.TypeDir},
		"sub/deeper/":      {Type: tar.TypeDir},
		"sub/deeper/b.txt": {Type: tar.TypeReg, Mode: 0o750, Body: "nested"},
		"sub/link":         {Type: tar.TypeSymlink, Link: "../a.txt"},
		"abs-link":         {Type: tar.TypeSymlink, Link: "/etc/passwd"},
		"empty/":           {Type: tar.TypeDir},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tar entries (-want +got):\n%s", diff)
	}

	// The CLI downloads the same bytes and checks the hash.
	dst := filepath.Join(t.TempDir(), "blob.bin")
	if out, errOut, code := pt(t, nil, "artifact", "download", file.ID, "-o", dst); code != 0 {
		t.Fatalf("pt artifact download: %d %s %s", code, out, errOut)
	}
	if b, _ := os.ReadFile(dst); !bytes.Equal(b, blob) {
		t.Error("pt artifact download wrote other bytes")
	}

	// Another org: 404 everywhere.
	_, other := createOrg(t, c, "artifacts-other-"+randHex(3))
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/artifacts/" + file.ID}, {"GET", "/v1/artifacts/" + file.ID + "/content"}, {"DELETE", "/v1/artifacts/" + file.ID},
	} {
		if r := other.do(tc.method, tc.path, nil); r.Status != 404 || r.JSON()["code"] != "not_found" {
			t.Errorf("other org %s %s: %d %s", tc.method, tc.path, r.Status, r.Body)
		}
	}
	if r := other.do("GET", "/v1/artifacts", nil); strings.Contains(string(r.Body), file.ID) {
		t.Errorf("other org lists the artifact: %s", r.Body)
	}

	// Delete: 204, then 404.
	for _, a := range []artifactJSON{file, dir, text} {
		if r := c.do("DELETE", "/v1/artifacts/"+a.ID, nil); r.Status != 204 {
			t.Errorf("delete %s: %d %s", a.ID, r.Status, r.Body)
		}
		if r := c.do("GET", "/v1/artifacts/"+a.ID+"/content", nil); r.Status != 404 {
			t.Errorf("deleted %s content: %d", a.ID, r.Status)
		}
	}
}
