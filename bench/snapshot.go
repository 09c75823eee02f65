package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"golang.org/x/sys/unix"
)

var (
	snapRuns = flag.Int("snapshot-runs", 20, "runs per snapshot measurement (0 skips the snapshot bench)")
	snapOnly = flag.Bool("only-snapshots", false, "run only the snapshot bench (snapshot.go)")
	forkRuns = flag.Int("fork-runs", 3, "fork ×10 runs per class in the snapshot bench")
)

// snapshotBench measures, on both runtime classes: snapshot latency (disk;
// and memory on gvisor) against a raw reflink copy of the same image,
// fork ×10 wall time against ten parallel creates from the template,
// clone-from-snapshot create→first exec against create→first exec from
// the template, and backup throughput against zstd -1 of the same data.
func snapshotBench(c *benchkit.Client, runs int, dataDir string) error {
	if err := c.EnsureTemplate("busybox"); err != nil {
		return err
	}
	fmt.Printf("\nSnapshots, clones, forks and backups (%d runs each, fork ×10 %d runs)\n", runs, *forkRuns)
	for _, class := range []string{"runc", "gvisor"} {
		if err := snapshotClass(c, class, runs, dataDir); err != nil {
			return fmt.Errorf("%s: %w", class, err)
		}
	}
	return backupBench(c, dataDir)
}

func snapCreate(c *benchkit.Client, class string, extra map[string]any) (string, error) {
	body := map[string]any{"template": "busybox", "runtime": class, "cpu": 1, "ram_mb": 512, "disk_gb": 2}
	for k, v := range extra {
		body[k] = v
	}
	if extra["from_snapshot"] != nil {
		body = extra
	}
	st, b, err := c.Do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", body)
	if err != nil || st != 201 {
		return "", fmt.Errorf("create: %d %s %v", st, b, err)
	}
	var m struct{ ID, State string }
	json.Unmarshal(b, &m)
	if m.State != "running" {
		return "", fmt.Errorf("create: %s", b)
	}
	return m.ID, nil
}

func snapshotClass(c *benchkit.Client, class string, runs int, dataDir string) error {
	id, err := snapCreate(c, class, nil)
	if err != nil {
		return err
	}
	defer c.Delete(id)
	if _, err := c.Exec(id, []string{"sh", "-c", "head -c 20000000 /dev/urandom > /root/data"}); err != nil {
		return err
	}
	// Baseline: a raw reflink copy of the same disk image.
	img, err := findImage(dataDir, id)
	if err != nil {
		return err
	}
	var reflink []time.Duration
	for i := range runs {
		dst := fmt.Sprintf("%s.bench-%d", img, i)
		t0 := time.Now()
		if err := cloneFile(img, dst); err != nil {
			return fmt.Errorf("reflink baseline: %w", err)
		}
		reflink = append(reflink, time.Since(t0))
		os.Remove(dst)
	}
	benchkit.Report(class+": raw reflink copy of the disk image", reflink, nil)

	kinds := []bool{false}
	if class == "gvisor" {
		kinds = append(kinds, true)
	}
	for _, memory := range kinds {
		var ds []time.Duration
		for range runs {
			t0 := time.Now()
			st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/snapshots", map[string]any{"memory": memory})
			if err != nil || st != 201 {
				return fmt.Errorf("snapshot: %d %s %v", st, b, err)
			}
			ds = append(ds, time.Since(t0))
			var m struct{ ID string }
			json.Unmarshal(b, &m)
			c.Do("DELETE", "/v1/snapshots/"+m.ID, nil)
		}
		what := "disk"
		if memory {
			what = "disk+memory"
		}
		benchkit.Report(fmt.Sprintf("%s: snapshot (%s) of a running sandbox", class, what), ds, reflink)
	}
	// Clones start from memory where the class has it.
	snap := snapshotID(c, id, class == "gvisor")
	defer c.Do("DELETE", "/v1/snapshots/"+snap, nil)

	// Clone from snapshot create→first exec, against a create from the
	// template.
	var fromTpl, fromSnap []time.Duration
	// firstExec times one create (with extra) to its first exec, then
	// deletes the sandbox untimed.
	firstExec := func(into *[]time.Duration, extra map[string]any) error {
		t0 := time.Now()
		nid, err := snapCreate(c, class, extra)
		if err != nil {
			return err
		}
		if _, err := c.Exec(nid, []string{"true"}); err != nil {
			return err
		}
		*into = append(*into, time.Since(t0))
		c.Delete(nid)
		c.WaitGone(nid)
		return nil
	}
	for range max(runs/4, 3) {
		if err := firstExec(&fromTpl, nil); err != nil {
			return err
		}
		if err := firstExec(&fromSnap, map[string]any{"from_snapshot": snap}); err != nil {
			return err
		}
	}
	benchkit.Report(class+": create→first exec from the template", fromTpl, nil)
	benchkit.Report(class+": create→first exec from a snapshot", fromSnap, fromTpl)

	// Fork ×10 wall time, against ten parallel creates.
	var forks, creates []time.Duration
	for range *forkRuns {
		t0 := time.Now()
		var wg sync.WaitGroup
		ids := make([]string, 10)
		errs := make([]error, 10)
		for i := range 10 {
			wg.Go(func() {
				ids[i], errs[i] = snapCreate(c, class, nil)
			})
		}
		wg.Wait()
		creates = append(creates, time.Since(t0))
		for i, nid := range ids {
			if errs[i] != nil {
				return errs[i]
			}
			c.Delete(nid)
		}
		for _, nid := range ids {
			c.WaitGone(nid)
		}

		t0 = time.Now()
		st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/fork?wait_for_state=running&wait_timeout_ms=300000", map[string]any{"count": 10})
		if err != nil || st != 201 {
			return fmt.Errorf("fork: %d %s %v", st, b, err)
		}
		forks = append(forks, time.Since(t0))
		var res struct {
			Memory    bool
			Sandboxes []struct{ ID, State string }
		}
		json.Unmarshal(b, &res)
		for _, s := range res.Sandboxes {
			if s.State != "running" {
				return fmt.Errorf("fork: %s is %s", s.ID, s.State)
			}
			c.Delete(s.ID)
		}
		for _, s := range res.Sandboxes {
			c.WaitGone(s.ID)
		}
	}
	benchkit.Report(class+": 10 parallel creates (wall)", creates, nil)
	benchkit.Report(class+": fork ×10 to running (wall)", forks, creates)
	return nil
}

func snapshotID(c *benchkit.Client, id string, memory bool) string {
	_, b, _ := c.Do("POST", "/v1/sandboxes/"+id+"/snapshots", map[string]any{"memory": memory})
	var m struct{ ID string }
	json.Unmarshal(b, &m)
	return m.ID
}

// backupBench backs a runc sandbox holding 200 MB of random data up twice
// (the second after a small change) and reports MB/s of the disk's data
// against zstd -1 of the same file.
func backupBench(c *benchkit.Client, dataDir string) error {
	id, err := snapCreate(c, "runc", nil)
	if err != nil {
		return err
	}
	defer c.Delete(id)
	const mb = 200
	if _, err := c.Exec(id, []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/urandom > /root/data", mb<<20)}); err != nil {
		return err
	}
	for i, what := range []string{"first backup", "second backup (small change)"} {
		if i == 1 {
			c.Exec(id, []string{"sh", "-c", "echo change >> /root/small"})
		}
		t0 := time.Now()
		st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/backups", nil)
		if err != nil || st != 202 {
			return fmt.Errorf("backup: %d %s %v", st, b, err)
		}
		var m struct {
			ID, State string
			SizeBytes int64 `json:"size_bytes"`
		}
		json.Unmarshal(b, &m)
		for m.State != "ready" {
			if m.State == "failed" || time.Since(t0) > 10*time.Minute {
				return fmt.Errorf("backup %s: %s", m.ID, m.State)
			}
			time.Sleep(50 * time.Millisecond)
			_, b, _ = c.Do("GET", "/v1/snapshots/"+m.ID, nil)
			json.Unmarshal(b, &m)
		}
		d := time.Since(t0)
		fmt.Printf("%-42s %d MB of data in %s: %.0f MB/s (image %d MB)\n", "runc: "+what, mb, benchkit.MS(d), float64(mb)/d.Seconds(), m.SizeBytes>>20)
		defer c.Do("DELETE", "/v1/snapshots/"+m.ID, nil)
	}
	data := filepath.Join(dataDir, "sandboxes", id, "disk", "upper", "root", "data")
	t0 := time.Now()
	if out, err := exec.Command("zstd", "-1", "-q", "-f", "-o", "/dev/null", data).CombinedOutput(); err != nil {
		return fmt.Errorf("zstd baseline: %v: %s", err, out)
	}
	d := time.Since(t0)
	fmt.Printf("%-42s %d MB in %s: %.0f MB/s\n", "baseline: zstd -1 of the same data", mb, benchkit.MS(d), float64(mb)/d.Seconds())
	return nil
}

// findImage finds the sandbox's disk image in the data dir's pool.
func findImage(dataDir, id string) (string, error) {
	var found string
	filepath.WalkDir(filepath.Join(dataDir, "disks"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == id+".img" {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	if found == "" {
		return "", fmt.Errorf("disk image of %s not found under %s", id, dataDir)
	}
	return found, nil
}

func cloneFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	return unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
}
