package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/platinum-dev/platinum/internal/image/imagetest"
	"github.com/platinum-dev/platinum/internal/template"
)

// e2eContextMaxBytes is ptd's build context limit in these tests, small
// enough to pass in a test.
const e2eContextMaxBytes = 8 << 20

var busyboxOnce struct {
	sync.Once
	layer v1.Layer
	err   error
}

// busyboxLayer is the busybox template's rootfs as an image layer.
func busyboxLayer(t *testing.T) v1.Layer {
	t.Helper()
	busyboxOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "pt-e2e-busybox-"+randHex(6))
		defer os.RemoveAll(dir)
		if busyboxOnce.err = template.BuildBusybox(context.Background(), dir); busyboxOnce.err != nil {
			return
		}
		busyboxOnce.layer = imagetest.DirLayer(t, dir)
	})
	if busyboxOnce.err != nil {
		t.Fatal(busyboxOnce.err)
	}
	return busyboxOnce.layer
}

var counterOnce struct {
	sync.Once
	bin []byte
	err error
}

// counterBinary builds testdata/counter, static.
func counterBinary(t *testing.T) []byte {
	t.Helper()
	counterOnce.Do(func() {
		out := filepath.Join(os.TempDir(), "pt-e2e-counter-"+randHex(6))
		defer os.Remove(out)
		cmd := exec.Command("go", "build", "-o", out, "./testdata/counter/main.go")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			counterOnce.err = fmt.Errorf("go build counter: %v: %s", err, b)
			return
		}
		counterOnce.bin, counterOnce.err = os.ReadFile(out)
	})
	if counterOnce.err != nil {
		t.Fatal(counterOnce.err)
	}
	return counterOnce.bin
}

// buildLog is what following a build's log saw.
type buildLog struct {
	lines []map[string]any
	took  time.Duration
}

func (l buildLog) of(typ string) []map[string]any {
	var out []map[string]any
	for _, ln := range l.lines {
		if ln["type"] == typ {
			out = append(out, ln)
		}
	}
	return out
}

func (l buildLog) String() string {
	var b strings.Builder
	for _, ln := range l.lines {
		js, _ := json.Marshal(ln)
		b.Write(js)
		b.WriteByte('\n')
	}
	return b.String()
}

// startBuild posts a build and returns the accepted build's record.
func (c *client) startBuild(body map[string]any) map[string]any {
	c.t.Helper()
	r := c.do("POST", "/v1/templates", body)
	if r.Status != 202 {
		c.t.Fatalf("POST /v1/templates: %d %s", r.Status, r.Body)
	}
	return r.JSON()
}

// followBuild streams a build's log until it ends and returns the build's
// final record and the log.
func (c *client) followBuild(slug, id string) (map[string]any, buildLog) {
	c.t.Helper()
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", env.url+"/v1/templates/"+slug+"/builds/"+id+"/logs?follow=true", nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("logs: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var lg buildLog
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			c.t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		lg.lines = append(lg.lines, m)
	}
	lg.took = time.Since(t0)
	if len(lg.lines) == 0 || lg.lines[len(lg.lines)-1]["type"] != "done" {
		c.t.Fatalf("the log did not end with done:\n%s", lg)
	}
	r := c.do("GET", "/v1/templates/"+slug+"/builds/"+id, nil)
	if r.Status != 200 {
		c.t.Fatalf("get build: %d %s", r.Status, r.Body)
	}
	return r.JSON(), lg
}

// build runs a template build to its end and fails the test unless it
// made a version.
func (c *client) build(body map[string]any) (map[string]any, buildLog) {
	c.t.Helper()
	b := c.startBuild(body)
	got, lg := c.followBuild(body["slug"].(string), b["id"].(string))
	if got["status"] != "ready" {
		c.t.Fatalf("build %s: %v\n%s", got["id"], got, lg)
	}
	return got, lg
}

// upload posts a tar for a template build.
func (c *client) upload(purpose string, tarball []byte) string {
	c.t.Helper()
	r := c.do("POST", "/v1/templates/uploads?purpose="+purpose, tarball)
	if r.Status != 201 {
		c.t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	return r.JSON()["id"].(string)
}

// contextTar packs files (name → content; a "+x" suffix on the name makes
// it executable) as a build context.
func contextTar(files map[string]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, body := range files {
		mode := int64(0o644)
		if rest, ok := strings.CutSuffix(n, "+x"); ok {
			n, mode = rest, 0o755
		}
		tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(body)), ModTime: time.Unix(1700000000, 0)})
		tw.Write([]byte(body))
	}
	tw.Close()
	return buf.Bytes()
}

// newOrg creates another org and returns a client with its token.
func newOrg(t *testing.T, c *client) *client {
	t.Helper()
	id, other := createOrg(t, c, "other-"+randHex(4))
	t.Cleanup(func() { c.do("DELETE", "/v1/orgs/"+id, nil) })
	return other
}

// writeDockerSave writes img as `docker save` would.
func writeDockerSave(w io.Writer, img v1.Image) error {
	tag, err := name.NewTag("example.com/app:v1")
	if err != nil {
		return err
	}
	return tarball.Write(tag, img, w)
}
