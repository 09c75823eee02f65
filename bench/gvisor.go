package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
)

// runtimeBench measures both runtime classes side by side in one run:
// create → first exec, and stop → start with memory of a sandbox holding
// 256 MB of RSS (runc: warm freeze and thaw; gvisor: checkpoint to disk
// and restore), each start timed from the start call to the first exec
// answering. dataDir is the bench ptd's, for the checkpoint's size.
func runtimeBench(c *benchkit.Client, n int, dataDir string) error {
	if err := c.EnsureTemplate("busybox"); err != nil {
		return err
	}
	create := map[string][]time.Duration{}
	for _, class := range []string{"runc", "gvisor"} {
		for i := 0; i < n; i++ {
			t0 := time.Now()
			id, err := createClass(c, class, 512)
			if err != nil {
				return err
			}
			if _, err := c.Exec(id, []string{"true"}); err != nil {
				return err
			}
			create[class] = append(create[class], time.Since(t0))
			if err := c.Delete(id); err != nil {
				return err
			}
			c.WaitGone(id)
		}
	}
	benchkit.Report("create → first exec (busybox, runc)", create["runc"], nil)
	benchkit.Report("create → first exec (busybox, gvisor)", create["gvisor"], create["runc"])

	// awk doubles a string to 256 MiB and keeps it while it waits on a
	// FIFO nobody writes (awk's system() does not keep it alive in gVisor).
	const hog = `mkfifo /tmp/hog.fifo; awk 'BEGIN { s = "0123456789abcdef"; while (length(s) < 268435456) s = s s; print "ok" > "/tmp/hog.ready"; close("/tmp/hog.ready"); getline x < "/tmp/hog.fifo"; print length(s) }' </dev/null >/dev/null 2>&1 &`
	restore := map[string][]time.Duration{}
	stop := map[string][]time.Duration{}
	for _, class := range []string{"runc", "gvisor"} {
		id, err := createClass(c, class, 1024)
		if err != nil {
			return err
		}
		if _, err := c.Exec(id, []string{"sh", "-c", hog}); err != nil {
			return err
		}
		if err := waitFile(c, id, "/tmp/hog.ready"); err != nil {
			return err
		}
		if _, b, err := c.Do("GET", "/v1/sandboxes/"+id+"/metrics", nil); err == nil {
			var m struct {
				MemoryUsedBytes int64 `json:"memory_used_bytes"`
			}
			json.Unmarshal(b, &m)
			fmt.Printf("%s sandbox memory in use before the stops: %d MB\n", class, m.MemoryUsedBytes>>20)
		}
		for i := 0; i < n; i++ {
			t0 := time.Now()
			if st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); err != nil || st != 200 {
				return fmt.Errorf("stop: %d %s %v", st, b, err)
			}
			stop[class] = append(stop[class], time.Since(t0))
			if class == "gvisor" && i == 0 {
				fmt.Printf("gvisor checkpoint image of a sandbox holding 256 MB: %d MB\n", dirSize(filepath.Join(dataDir, "sandboxes", id, "checkpoint"))>>20)
			}
			t1 := time.Now()
			st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil)
			if err != nil || st != 200 || !bytes.Contains(b, []byte(`"restore":"memory"`)) {
				return fmt.Errorf("start %s: %d %s %v", class, st, b, err)
			}
			if _, err := c.Exec(id, []string{"true"}); err != nil {
				return err
			}
			restore[class] = append(restore[class], time.Since(t1))
		}
		if _, err := c.Exec(id, []string{"sh", "-c", "pidof awk"}); err != nil {
			return fmt.Errorf("%s: the 256 MB process did not survive: %w", class, err)
		}
		c.Delete(id)
		c.WaitGone(id)
	}
	benchkit.Report("stop with memory, 256 MB RSS (runc freeze)", stop["runc"], nil)
	benchkit.Report("stop with memory, 256 MB RSS (gvisor ckpt)", stop["gvisor"], stop["runc"])
	benchkit.Report("start → exec, 256 MB RSS (runc thaw)", restore["runc"], nil)
	benchkit.Report("start → exec, 256 MB RSS (gvisor restore)", restore["gvisor"], restore["runc"])
	return nil
}

// createClass makes a running busybox sandbox of the runtime class.
func createClass(c *benchkit.Client, class string, ramMB int) (string, error) {
	return c.CreateRunning(class, map[string]any{
		"template": "busybox", "runtime": class, "cpu": 1, "ram_mb": ramMB, "disk_gb": 1})
}

// waitFile waits until path exists in the sandbox.
func waitFile(c *benchkit.Client, id, path string) error {
	for i := 0; i < 600; i++ {
		if st, b, _ := c.Do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"test", "-e", path}}); st == 200 && bytes.Contains(b, []byte(`"exit_code":0`)) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s never appeared in %s", path, id)
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
