package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/preview"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// previewBench measures the preview proxy against going straight to the
// sandbox's address (the baseline, in the same run) with the server the
// e2e tests use (tests/e2e/testdata/previewsrv) inside a busybox sandbox:
// a small GET's latency, a 100 MB download's throughput, and the time from
// a request to a warm-stopped sandbox to its first response byte.
func previewBench(c *benchkit.Client, d *ptdtest.Daemon, n int) error {
	if err := c.EnsureTemplate("busybox"); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pt-bench-previewsrv-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "previewsrv")
	build := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "./tests/e2e/testdata/previewsrv")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build previewsrv: %v\n%s", err, out)
	}
	id, err := c.Create("busybox")
	if err != nil {
		return err
	}
	defer c.Delete(id)
	if err := uploadFile(c, id, "/root/previewsrv", bin); err != nil {
		return err
	}
	const start = `chmod +x /root/previewsrv; (/root/previewsrv -listen :8080 </dev/null >/tmp/previewsrv.log 2>&1 &)
for i in $(seq 100); do wget -q -O /dev/null http://127.0.0.1:8080/hello && exit 0; sleep 0.05; done; exit 1`
	if _, err := c.Exec(id, []string{"sh", "-c", start}); err != nil {
		return err
	}
	out, err := c.Exec(id, []string{"sh", "-c", "ip -4 -o addr show dev eth0"})
	if err != nil {
		return err
	}
	addr := ""
	for _, f := range strings.Fields(out) {
		if ip, _, ok := strings.Cut(f, "/"); ok && net.ParseIP(ip) != nil {
			addr = ip
			break
		}
	}
	if addr == "" {
		return fmt.Errorf("no sandbox address in %q", out)
	}
	st, b, err := c.Do("GET", "/v1/sandboxes/"+id+"/preview-urls/8080", nil)
	if err != nil || st != 200 {
		return fmt.Errorf("preview-urls: %d %s %v", st, b, err)
	}
	var pu struct{ Token string }
	if err := json.Unmarshal(b, &pu); err != nil || pu.Token == "" {
		return fmt.Errorf("preview-urls: %s", b)
	}
	proxyBase := fmt.Sprintf("%s/%s/8080", d.PreviewURL, id)
	directBase := "http://" + net.JoinHostPort(addr, "8080")
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	get := func(url string, sink io.Writer) (time.Duration, int64, error) {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("X-Pt-Preview-Token", pu.Token)
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		m, err := io.Copy(sink, resp.Body)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("GET %s: %d", url, resp.StatusCode)
		}
		return time.Since(t0), m, err
	}

	// Small GETs, interleaved so both see the same machine load.
	var viaProxy, direct []time.Duration
	for i := 0; i < n*10+20; i++ {
		dp, _, err := get(proxyBase+"/hello", io.Discard)
		if err != nil {
			return err
		}
		dd, _, err := get(directBase+"/hello", io.Discard)
		if err != nil {
			return err
		}
		if i >= 20 { // warm-up: connections, caches
			viaProxy, direct = append(viaProxy, dp), append(direct, dd)
		}
	}
	benchkit.Report("small GET direct to the sandbox", direct, nil)
	benchkit.Report("small GET through the preview proxy", viaProxy, direct)
	fmt.Printf("%-42s p50 %s\n", "  added by the proxy", benchkit.MS(benchkit.Percentiles(viaProxy)[0]-benchkit.Percentiles(direct)[0]))

	// 100 MB downloads.
	const size = 100 << 20
	var dlProxy, dlDirect []time.Duration
	for i := 0; i < 5; i++ {
		for _, v := range []struct {
			base string
			into *[]time.Duration
		}{{proxyBase, &dlProxy}, {directBase, &dlDirect}} {
			dt, m, err := get(fmt.Sprintf("%s/download?n=%d", v.base, size), io.Discard)
			if err != nil || m != size {
				return fmt.Errorf("download: %d bytes, %v", m, err)
			}
			*v.into = append(*v.into, dt)
		}
	}
	reportDownloads(size, dlDirect, dlProxy, "100 MB download direct", "100 MB download through the proxy", "  throughput")
	if err := proxyAloneBench(); err != nil {
		return err
	}

	// Auto-resume: warm stop, then a request through the proxy, timed to
	// its first response byte; the baseline is an explicit API start
	// (waiting for running) and the same request straight to the sandbox.
	var resume, apiStart []time.Duration
	firstByte := func(url string) (time.Duration, error) {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", url, nil)
		req.Header.Set("X-Pt-Preview-Token", pu.Token)
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		one := make([]byte, 1)
		if _, err := io.ReadFull(resp.Body, one); err != nil || resp.StatusCode != 200 {
			return 0, fmt.Errorf("GET %s: %d %v", url, resp.StatusCode, err)
		}
		return time.Since(t0), nil
	}
	for i := 0; i < n; i++ {
		for _, viaAPI := range []bool{false, true} {
			if st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); err != nil || st != 200 {
				return fmt.Errorf("stop: %d %s %v", st, b, err)
			}
			if viaAPI {
				t0 := time.Now()
				if st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil); err != nil || st != 200 {
					return fmt.Errorf("start: %d %s %v", st, b, err)
				}
				if _, err := firstByte(directBase + "/hello"); err != nil {
					return err
				}
				apiStart = append(apiStart, time.Since(t0))
				continue
			}
			dt, err := firstByte(proxyBase + "/hello")
			if err != nil {
				return err
			}
			resume = append(resume, dt)
		}
	}
	benchkit.Report("API start (warm) + direct GET, first byte", apiStart, nil)
	benchkit.Report("auto-resume (warm) via proxy, first byte", resume, apiStart)
	return nil
}

// uploadFile writes a local file into the sandbox through the files API.
func uploadFile(c *benchkit.Client, id, dst, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	req, err := c.NewRequest(context.Background(), "PUT", "/v1/sandboxes/"+id+"/files?path="+dst, f)
	if err != nil {
		return err
	}
	st, b, err := benchkit.Send(req)
	if err != nil {
		return err
	}
	if st/100 != 2 {
		return fmt.Errorf("upload %s: %d %s", dst, st, b)
	}
	return nil
}

// loopbackBackend routes every preview request to a public port on
// 127.0.0.1, for measuring the proxy alone.
type loopbackBackend struct{ sb sandbox.Sandbox }

func (b loopbackBackend) PreviewTarget(ctx context.Context, id string) (sandbox.Sandbox, error) {
	return b.sb, nil
}

func (b loopbackBackend) AutoResume(ctx context.Context, id string, timeout time.Duration) (sandbox.Sandbox, error) {
	return b.sb, nil
}

func (loopbackBackend) Touch(string) {}

// proxyAloneBench measures 100 MB downloads from a loopback server, direct
// and through an in-process preview proxy: what the proxy itself sustains,
// apart from the sandbox's veth and the server inside it.
func proxyAloneBench() error {
	chunk := make([]byte, 256<<10)
	const size = 100 << 20
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for n := size; n > 0; n -= len(chunk) {
			if _, err := w.Write(chunk[:min(n, len(chunk))]); err != nil {
				return
			}
		}
	}))
	defer up.Close()
	port := up.Listener.Addr().(*net.TCPAddr).Port
	id := sandbox.NewID(sandbox.PrefixSandbox)
	be := loopbackBackend{sb: sandbox.Sandbox{ID: id, State: sandbox.StateRunning, Address: "127.0.0.1",
		Preview: &sandbox.Preview{Public: []int{port}}}}
	key := make([]byte, 32)
	signer, err := preview.NewSigner(key)
	if err != nil {
		return err
	}
	srv, err := preview.New(preview.DefaultConfig(), signer, be, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	var direct, proxied []time.Duration
	for i := 0; i < 10; i++ {
		for _, v := range []struct {
			url  string
			into *[]time.Duration
		}{{up.URL + "/", &direct}, {fmt.Sprintf("http://%s/%s/%d/", ln.Addr(), id, port), &proxied}} {
			t0 := time.Now()
			resp, err := hc.Get(v.url)
			if err != nil {
				return err
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || n != size {
				return fmt.Errorf("loopback download: %d bytes, %v", n, err)
			}
			*v.into = append(*v.into, time.Since(t0))
		}
	}
	reportDownloads(size, direct, proxied, "100 MB loopback download direct", "100 MB loopback download via proxy alone", "  throughput (proxy alone)")
	return nil
}

// reportDownloads prints the timings of downloads of size bytes direct
// and through the proxy, the latter against the former, then both p50
// throughputs.
func reportDownloads(size int, direct, proxied []time.Duration, directName, proxiedName, throughputName string) {
	mbps := func(ds []time.Duration) float64 { return float64(size) / benchkit.Percentiles(ds)[0].Seconds() / 1e6 }
	benchkit.Report(directName, direct, nil)
	benchkit.Report(proxiedName, proxied, direct)
	fmt.Printf("%-42s p50 %.0f MB/s through the proxy, %.0f MB/s direct\n", throughputName, mbps(proxied), mbps(direct))
}
