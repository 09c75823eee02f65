// Command bench measures Platinum against raw runc in the same run and
// prints p50/p95/p99 and ratios. It starts its own ptd (like the e2e
// tests), so it needs root and the packages scripts/setup.sh installs.
//
//	go run ./bench [-n 50] [-templates busybox,pt-base]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/oci"
	"github.com/platinum-dev/platinum/internal/template"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	n := flag.Int("n", 50, "runs per measurement")
	tpls := flag.String("templates", "busybox,pt-base", "templates to measure create→first exec on")
	archiveRuns := flag.Int("archive-runs", 3, "runs of the archive throughput bench (0 skips it)")
	flag.Parse()
	if *archiveRuns > 0 {
		defer func() {
			if err := archiveBench(*archiveRuns); err != nil {
				fmt.Fprintln(os.Stderr, "bench: archive:", err)
			}
		}()
	}
	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	d, err := ptdtest.Start(ptdtest.Options{RepoRoot: root})
	defer d.Stop()
	if err != nil {
		return err
	}
	c := &client{url: d.URL, token: d.Token}
	fmt.Printf("Platinum bench: %d runs each, %s\n\n", *n, time.Now().UTC().Format(time.RFC3339))

	base, err := runcBaseline(*n)
	if err != nil {
		return fmt.Errorf("runc baseline: %w", err)
	}
	report("raw runc run -d (busybox bundle)", base.run, nil)
	report("raw runc exec true", base.exec, nil)

	for _, tpl := range strings.Split(*tpls, ",") {
		if err := c.ensureTemplate(tpl); err != nil {
			return err
		}
		var create, del []time.Duration
		for i := 0; i < *n; i++ {
			t0 := time.Now()
			id, err := c.create(tpl)
			if err != nil {
				return err
			}
			if _, err := c.exec(id, []string{"true"}); err != nil {
				return err
			}
			create = append(create, time.Since(t0))
			t1 := time.Now()
			if err := c.delete(id); err != nil {
				return err
			}
			del = append(del, time.Since(t1))
			c.waitGone(id)
		}
		report("create → first exec ("+tpl+")", create, base.run)
		report("delete API call ("+tpl+")", del, nil)
	}

	id, err := c.create("busybox")
	if err != nil {
		return err
	}
	var execs []time.Duration
	for i := 0; i < *n*4; i++ {
		t0 := time.Now()
		if _, err := c.exec(id, []string{"true"}); err != nil {
			return err
		}
		execs = append(execs, time.Since(t0))
	}
	report("API exec round trip of true", execs, base.exec)

	// stop → start: warm (frozen in RAM, processes intact) and disk-only
	// (cold boot from the same disk), each timed from the start call to
	// the first exec answering.
	for _, mode := range []struct{ name, query, restore string }{
		{"warm", "", "memory"}, {"disk_only", "&memory=false", "disk_only"},
	} {
		var starts []time.Duration
		for i := 0; i < *n; i++ {
			if st, b, err := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped"+mode.query, nil); err != nil || st != 200 {
				return fmt.Errorf("stop: %d %s %v", st, b, err)
			}
			t0 := time.Now()
			st, b, err := c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil)
			if err != nil || st != 200 || !bytes.Contains(b, []byte(`"restore":"`+mode.restore+`"`)) {
				return fmt.Errorf("start: %d %s %v", st, b, err)
			}
			if _, err := c.exec(id, []string{"true"}); err != nil {
				return err
			}
			starts = append(starts, time.Since(t0))
		}
		report("stop → start → first exec ("+mode.name+")", starts, base.run)
	}
	return c.delete(id)
}

// report prints percentiles and, with a baseline, the p50 ratio.
func report(name string, ds []time.Duration, baseline []time.Duration) {
	p := percentiles(ds)
	line := fmt.Sprintf("%-40s n=%-4d p50 %8s  p95 %8s  p99 %8s", name, len(ds), ms(p[0]), ms(p[1]), ms(p[2]))
	if baseline != nil {
		b := percentiles(baseline)
		line += fmt.Sprintf("   p50 ratio vs baseline %.2fx", float64(p[0])/float64(b[0]))
	}
	fmt.Println(line)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

func percentiles(ds []time.Duration) [3]time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return [3]time.Duration{at(0.50), at(0.95), at(0.99)}
}

type baseline struct{ run, exec []time.Duration }

// runcBaseline times `runc run -d` and `runc exec true` on a bundle made
// by the same config generator ptd uses, over a plain busybox rootfs.
func runcBaseline(n int) (baseline, error) {
	var b baseline
	dir, err := os.MkdirTemp("/var/tmp", "pt-bench-runc-")
	if err != nil {
		return b, err
	}
	defer os.RemoveAll(dir)
	rootfs := filepath.Join(dir, "rootfs")
	if err := template.BuildBusybox(context.Background(), rootfs); err != nil {
		return b, err
	}
	stateRoot := filepath.Join(dir, "state")
	rt, err := oci.New(oci.Config{Root: stateRoot}, nil)
	if err != nil {
		return b, err
	}
	cg := "/platinum-bench-" + ptdtest.RandHex(3)
	defer ptdtest.RemoveCgroup(cg)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("bench-%d", i)
		bundle := filepath.Join(dir, id)
		os.MkdirAll(bundle, 0o700)
		spec := runtime.Spec{ID: id, BundleDir: bundle, RootFS: rootfs, Hostname: id, CgroupPath: cg + "/" + id,
			Resources: runtime.Resources{CPU: 1, MemoryBytes: 512 << 20, Pids: 1024},
			Args:      []string{"/bin/sleep", "1000"}}
		if err := rt.WriteConfig(spec); err != nil {
			return b, err
		}
		// Stdio stays on /dev/null: the detached container would inherit
		// pipes and hold them open forever.
		t0 := time.Now()
		logFile := filepath.Join(bundle, "runc.log")
		if err := exec.Command("runc", "--root", stateRoot, "--log", logFile, "run", "-d", "--bundle", bundle, id).Run(); err != nil {
			out, _ := os.ReadFile(logFile)
			return b, fmt.Errorf("runc run: %v: %s", err, out)
		}
		b.run = append(b.run, time.Since(t0))
		t1 := time.Now()
		if out, err := exec.Command("runc", "--root", stateRoot, "exec", id, "/bin/true").CombinedOutput(); err != nil {
			return b, fmt.Errorf("runc exec: %v: %s", err, out)
		}
		b.exec = append(b.exec, time.Since(t1))
		rt.Delete(context.Background(), id)
	}
	return b, nil
}

// client is a minimal REST client (the SDK is measured by its own tests).
type client struct{ url, token string }

func (c *client) do(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (c *client) create(tpl string) (string, error) {
	st, b, err := c.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": tpl, "cpu": 1, "ram_mb": 512, "disk_gb": 1})
	if err != nil || st != 201 {
		return "", fmt.Errorf("create %s: %d %s %v", tpl, st, b, err)
	}
	var m struct{ ID, State string }
	json.Unmarshal(b, &m)
	if m.State != "running" {
		return "", fmt.Errorf("create %s: %s", tpl, b)
	}
	return m.ID, nil
}

func (c *client) exec(id string, argv []string) (string, error) {
	st, b, err := c.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": argv})
	if err != nil || st != 200 {
		return "", fmt.Errorf("exec: %d %s %v", st, b, err)
	}
	return string(b), nil
}

func (c *client) delete(id string) error {
	st, b, err := c.do("DELETE", "/v1/sandboxes/"+id, nil)
	if err != nil || st != 202 {
		return fmt.Errorf("delete: %d %s %v", st, b, err)
	}
	return nil
}

// waitGone waits until teardown finished, so runs do not overlap.
func (c *client) waitGone(id string) {
	for i := 0; i < 1000; i++ {
		_, b, _ := c.do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil)
		if bytes.Contains(b, []byte(`"state":"deleted"`)) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *client) ensureTemplate(slug string) error {
	for i := 0; i < 1800; i++ {
		_, b, err := c.do("GET", "/v1/templates/"+slug, nil)
		if err != nil {
			return err
		}
		switch {
		case bytes.Contains(b, []byte(`"status":"ready"`)):
			return nil
		case bytes.Contains(b, []byte(`"status":"not_built"`)), bytes.Contains(b, []byte(`"status":"failed"`)):
			c.do("POST", "/v1/templates/"+slug+"/build", nil)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("template %s never became ready", slug)
}
