package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/platinum-dev/platinum/internal/benchkit"
)

var (
	tplOnly    = flag.Bool("only-templates", false, "run only the custom template bench (templates.go): image pull+unpack, Dockerfile builds, create from a started-state snapshot")
	tplRuns    = flag.Int("template-runs", 5, "runs per custom template measurement")
	tplImageMB = flag.Int("template-image-mb", 100, "size of the image the pull bench pulls (MB of file data, in two layers)")
	tplParts   = flag.String("template-parts", "pull,dockerfile,started", "which custom template measurements to run")
)

// templatesBench measures custom templates (docs/templates.md) against a
// ptd of its own that may pull from loopback: an image of -template-image-mb
// pulled from an in-process registry and unpacked into a template version,
// beside the same pull and unpack done by go-containerregistry alone; a
// 5-step Dockerfile built cold (no_cache) and fully cached; and create →
// first answer from the template's server (2 s to start), booted cold and restored from
// the template's started-state snapshot (gVisor), interleaved.
func templatesBench(runs int) error {
	d, c, err := benchkit.StartPtd("--image-registry-allow-private", "--log-level", "info")
	defer d.Stop()
	if err != nil {
		return err
	}
	if err := c.EnsureTemplate("busybox"); err != nil {
		return err
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://")
	fmt.Printf("Platinum custom template bench: %d runs each, %s\n\n", runs, time.Now().UTC().Format(time.RFC3339))
	parts := map[string]bool{}
	for _, p := range strings.Split(*tplParts, ",") {
		parts[p] = true
	}
	if parts["pull"] {
		if err := pullBench(c, reg, runs); err != nil {
			return fmt.Errorf("pull: %w", err)
		}
	}
	if parts["dockerfile"] {
		if err := dockerfileBench(c, runs); err != nil {
			return fmt.Errorf("dockerfile: %w", err)
		}
	}
	if parts["started"] {
		if err := startedBench(c, runs); err != nil {
			// ptd's lines about the failed sandbox say where it stopped.
			if id := sandboxIDRE.FindString(err.Error()); id != "" {
				for _, l := range strings.Split(d.Log(), "\n") {
					if strings.Contains(l, id) {
						fmt.Fprintln(os.Stderr, l)
					}
				}
			}
			return fmt.Errorf("started: %w", err)
		}
	}
	return nil
}

var sandboxIDRE = regexp.MustCompile(`sbx_[0-9A-Z]{26}`)

// randomImage is an image of two layers holding mb MB of random data in
// 1 MB files (incompressible: the bytes on the wire are the data's). Each
// seed makes different layers, so no run finds them stored already.
func randomImage(seed uint64, mb int) (v1.Image, error) {
	rng := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), 7})
	img := empty.Image
	chunk := make([]byte, 1<<20)
	for l := range 2 {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("data%d/", l), Typeflag: tar.TypeDir, Mode: 0o755})
		for f := range mb / 2 {
			rng.Read(chunk)
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("data%d/f%03d", l, f), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(chunk))})
			tw.Write(chunk)
		}
		tw.Close()
		b := buf.Bytes()
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
			tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			return nil, err
		}
	}
	return mutate.Config(img, v1.Config{Env: []string{"PATH=/bin"}})
}

func push(ref string, img v1.Image) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	return remote.Write(r, img)
}

// waitBuild polls a build until it ends and returns its record.
func waitBuild(c *benchkit.Client, slug, id string) (map[string]any, error) {
	for {
		st, b, err := c.Do("GET", "/v1/templates/"+slug+"/builds/"+id, nil)
		if err != nil || st != 200 {
			return nil, fmt.Errorf("get build: %d %s %v", st, b, err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		if m["status"] != "running" {
			if m["status"] != "ready" {
				return m, fmt.Errorf("build %s: %s", id, b)
			}
			return m, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// buildCustomTemplate posts a build, waits for it and returns how long it took.
func buildCustomTemplate(c *benchkit.Client, body map[string]any) (time.Duration, map[string]any, error) {
	t0 := time.Now()
	st, b, err := c.Do("POST", "/v1/templates", body)
	if err != nil || st != 202 {
		return 0, nil, fmt.Errorf("POST /v1/templates: %d %s %v", st, b, err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	done, err := waitBuild(c, body["slug"].(string), m["id"].(string))
	return time.Since(t0), done, err
}

// rawPull is the baseline: go-containerregistry pulls ref and writes its
// layers' files into a fresh directory, nothing else (no layer store, no
// version, no symlink-safe resolution).
func rawPull(ref string) (time.Duration, error) {
	dir, err := os.MkdirTemp("/var/tmp", "pt-bench-pull-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	t0 := time.Now()
	r, err := name.ParseReference(ref)
	if err != nil {
		return 0, err
	}
	img, err := remote.Image(r)
	if err != nil {
		return 0, err
	}
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return 0, err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				rc.Close()
				return 0, err
			}
			p := filepath.Join(dir, filepath.Clean("/"+h.Name))
			switch h.Typeflag {
			case tar.TypeDir:
				err = os.MkdirAll(p, 0o755)
			case tar.TypeReg:
				var f *os.File
				if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
					_, err = io.Copy(f, tr)
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
			}
			if err != nil {
				rc.Close()
				return 0, err
			}
		}
		rc.Close()
	}
	return time.Since(t0), nil
}

// pullBench: POST /v1/templates from_image → version ready, against the
// raw pull + unpack, alternating, each run a new image.
func pullBench(c *benchkit.Client, reg string, runs int) error {
	mb := *tplImageMB
	var plat, raw []time.Duration
	for i := range runs {
		for _, which := range []string{"raw", "platinum"} {
			img, err := randomImage(uint64(i*2+len(which)), mb)
			if err != nil {
				return err
			}
			ref := fmt.Sprintf("%s/bench/%s:%d", reg, which, i)
			if err := push(ref, img); err != nil {
				return err
			}
			if which == "raw" {
				d, err := rawPull(ref)
				if err != nil {
					return err
				}
				raw = append(raw, d)
				continue
			}
			slug := fmt.Sprintf("bench-pull-%d", i)
			d, _, err := buildCustomTemplate(c, map[string]any{"slug": slug, "from_image": ref})
			if err != nil {
				return err
			}
			plat = append(plat, d)
			c.Do("DELETE", "/v1/templates/"+slug, nil)
		}
	}
	fmt.Printf("Image pull + unpack, %d MB of file data in 2 layers, from a loopback registry\n", mb)
	benchkit.Report("go-containerregistry pull + untar (baseline)", raw, nil)
	benchkit.Report("POST /v1/templates from_image → ready", plat, raw)
	p := benchkit.Percentiles(plat)
	rp := benchkit.Percentiles(raw)
	fmt.Printf("%-42s platinum %.0f MB/s, baseline %.0f MB/s (p50)\n\n", "throughput", float64(mb)/p[0].Seconds(), float64(mb)/rp[0].Seconds())
	return nil
}

// contextTarball packs a build context of files.
func contextTarball(files map[string][]byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, b := range files {
		tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(1700000000, 0)})
		tw.Write(b)
	}
	tw.Close()
	return buf.Bytes()
}

// dockerfileBench: a 5-step Dockerfile (COPY, RUN, ENV, WORKDIR, RUN)
// built with no_cache, and built again with every step a cache hit.
func dockerfileBench(c *benchkit.Client, runs int) error {
	data := make([]byte, 4<<20)
	rand.NewChaCha8([32]byte{9}).Read(data)
	req, _ := c.NewRequest(context.Background(), "POST", "/v1/templates/uploads?purpose=context", bytes.NewReader(contextTarball(map[string][]byte{"data.bin": data})))
	req.Header.Set("Content-Type", "application/x-tar")
	st, b, err := benchkit.Send(req)
	if err != nil {
		return err
	}
	if st != 201 {
		return fmt.Errorf("upload: %d %s", st, b)
	}
	var up struct{ ID string }
	json.Unmarshal(b, &up)
	dockerfile := "FROM busybox\nCOPY data.bin /data/\nRUN sha256sum /data/data.bin > /data/sum\nENV MODE=bench\nWORKDIR /data\nRUN echo built > built.txt\n"
	body := func(slug string, noCache bool) map[string]any {
		return map[string]any{"slug": slug, "dockerfile": dockerfile, "context_upload_id": up.ID, "no_cache": noCache}
	}
	// One build fills the cache (and pulls nothing: FROM is a template).
	if _, _, err := buildCustomTemplate(c, body("bench-df", false)); err != nil {
		return err
	}
	var cold, cached []time.Duration
	for range runs {
		d, _, err := buildCustomTemplate(c, body("bench-df", true))
		if err != nil {
			return err
		}
		cold = append(cold, d)
		d, m, err := buildCustomTemplate(c, body("bench-df", false))
		if err != nil {
			return err
		}
		cached = append(cached, d)
		// Keep the slug's versions few; the newest stays.
		if v, ok := m["version"].(float64); ok && v > 2 {
			c.Do("DELETE", fmt.Sprintf("/v1/templates/bench-df/versions/%s", m["version_id"]), nil)
		}
	}
	fmt.Println("Dockerfile build, 5 steps (COPY 4 MB, RUN, ENV, WORKDIR, RUN) FROM busybox, POST → ready")
	benchkit.Report("cold (no_cache)", cold, nil)
	benchkit.Report("fully cached", cached, cold)
	fmt.Println()
	c.Do("DELETE", "/v1/templates/bench-df", nil)
	return nil
}

// startedBench: create → the template's server answering, on gVisor, for
// a template booted cold and one restored from its started-state snapshot.
func startedBench(c *benchkit.Client, runs int) error {
	dockerfile := "FROM busybox\nRUN mkdir -p /www && echo hello > /www/index.html\n"
	// The server takes 2 s to come up, as a dev server or a model loading
	// does; the started-state snapshot skips that wait.
	settings := map[string]any{"start_cmd": "sleep 2 && exec httpd -f -p 8080 -h /www", "ready_cmd": "wget -qO- http://127.0.0.1:8080/",
		"runtime": "gvisor", "cpu": 1, "ram_mb": 512, "disk_gb": 2}
	for _, slug := range []string{"bench-cold", "bench-started"} {
		if _, _, err := buildCustomTemplate(c, map[string]any{"slug": slug, "dockerfile": dockerfile, "settings": settings, "snapshot": slug == "bench-started"}); err != nil {
			return err
		}
		defer c.Do("DELETE", "/v1/templates/"+slug, nil)
	}
	one := func(slug, wantRestore string) (time.Duration, error) {
		t0 := time.Now()
		st, b, err := c.Do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", map[string]any{"template": slug})
		if err != nil || st != 201 {
			return 0, fmt.Errorf("create %s: %d %s %v", slug, st, b, err)
		}
		var m struct{ ID, State, Restore string }
		json.Unmarshal(b, &m)
		defer func() { c.Delete(m.ID); c.WaitGone(m.ID) }()
		if m.State != "running" || (wantRestore != "" && m.Restore != wantRestore) {
			return 0, fmt.Errorf("create %s: %s", slug, b)
		}
		out, err := c.Exec(m.ID, []string{"wget", "-qO-", "http://127.0.0.1:8080/"})
		if err != nil || !strings.Contains(out, "hello") {
			return 0, fmt.Errorf("first answer from %s: %s %v", slug, out, err)
		}
		return time.Since(t0), nil
	}
	var cold, started []time.Duration
	for range runs {
		d, err := one("bench-cold", "")
		if err != nil {
			return err
		}
		cold = append(cold, d)
		if d, err = one("bench-started", "memory"); err != nil {
			return err
		}
		started = append(started, d)
	}
	fmt.Println("Create → first exec answered by the template's server (start_cmd: sleep 2, then busybox httpd), gVisor, 1 vCPU, 512 MB")
	benchkit.Report("cold boot (start_cmd + ready_cmd)", cold, nil)
	benchkit.Report("started-state snapshot (restore: memory)", started, cold)
	return nil
}
