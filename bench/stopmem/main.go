// Command stopmem measures stop snapshots with memory (docs/ARCHITECTURE.md,
// "Many hosts", "Stop snapshots") on two hosts on one store: per round, two
// gVisor sandboxes on host b, each holding -mb MB of random data in
// /dev/shm (sandbox memory), are stopped, one keeping memory (its stop
// snapshot carries the checkpoint) and one with memory=false (disk only,
// the baseline), in alternating order; it times the stop call and the stop
// snapshot's upload (stop → pt:stop ready). Then b's ptd is killed and,
// once b is lost, both start on a through the API (start → running →
// first exec): the memory one restores its processes, the other boots
// cold. Every round starts two fresh hosts. It needs root, PostgreSQL's
// server binaries and scripts/setup.sh.
//
//	go run ./bench/stopmem [-n 3] [-mb 64]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

func main() { benchkit.Main("bench/stopmem", run) }

type timings struct{ stop, snap, start []time.Duration }

func run() error {
	n := flag.Int("n", 3, "rounds (each starts two fresh hosts)")
	mb := flag.Int("mb", 64, "MB of random data each sandbox holds in memory")
	flag.Parse()
	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("bench/stopmem: %d rounds, %d MB in memory per sandbox, load average at start %s", *n, *mb, load)
	var mem, disk timings
	for i := range *n {
		if err := round(root, *mb, i%2 == 0, &mem, &disk); err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
	}
	benchkit.Report("stop call, with memory (checkpoint)", mem.stop, disk.stop)
	benchkit.Report("stop call, memory=false (baseline)", disk.stop, disk.stop)
	benchkit.Report("stop → stop snapshot ready, with memory", mem.snap, disk.snap)
	benchkit.Report("stop → stop snapshot ready, disk only (baseline)", disk.snap, disk.snap)
	benchkit.Report("start on the other host → first exec, memory restored", mem.start, disk.start)
	benchkit.Report("start on the other host → first exec, cold boot (baseline)", disk.start, disk.start)
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Printf("load average at end %s", load)
	return nil
}

func round(root string, mb int, memFirst bool, mem, disk *timings) error {
	objects, err := os.MkdirTemp("", "pt-bench-objects-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(objects)
	args := []string{"--log-level", "warn", "--host-heartbeat", "200ms", "--host-lost-after", "3s", "--objects", objects}
	a, err := ptdtest.Start(ptdtest.Options{RepoRoot: root, Store: "postgres", ExtraArgs: args})
	if err != nil {
		return err
	}
	defer a.Stop()
	b, err := ptdtest.Start(ptdtest.Options{RepoRoot: root, Store: "sqlite", ExtraArgs: append(append([]string{}, args...), "--store", a.StoreURL)})
	if err != nil {
		return err
	}
	defer b.Stop()
	cl := &benchkit.Client{URL: a.URL, Token: a.Token}
	hostID := func(d *ptdtest.Daemon) string {
		id, _ := os.ReadFile(filepath.Join(d.DataDir, "host-id"))
		return strings.TrimSpace(string(id))
	}
	idA, idB := hostID(a), hostID(b)
	if st, body, err := cl.Do("POST", "/v1/hosts/"+idA+"/drain", nil); err != nil || st != 200 {
		return fmt.Errorf("drain a: %d %s %v", st, body, err)
	}
	ids := map[bool]string{}
	for _, withMem := range []bool{true, false} {
		id, err := cl.CreateRunning("gvisor", map[string]any{"template": "busybox", "runtime": "gvisor"})
		if err != nil {
			return err
		}
		defer cl.Delete(id)
		if _, err := cl.Exec(id, []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/urandom > /dev/shm/blob; sleep 1000 </dev/null >/dev/null 2>&1 &", mb<<20)}); err != nil {
			return err
		}
		ids[withMem] = id
	}
	if st, body, err := cl.Do("POST", "/v1/hosts/"+idA+"/undrain", nil); err != nil || st != 200 {
		return fmt.Errorf("undrain a: %d %s %v", st, body, err)
	}
	order := []bool{memFirst, !memFirst}
	stopped := map[bool]time.Time{}
	for _, withMem := range order {
		q := "?wait_for_state=stopped"
		if !withMem {
			q += "&memory=false"
		}
		t0 := time.Now()
		if st, body, err := cl.Do("POST", "/v1/sandboxes/"+ids[withMem]+"/stop"+q, nil); err != nil || st != 200 {
			return fmt.Errorf("stop: %d %s %v", st, body, err)
		}
		stopped[withMem] = time.Now()
		pick(withMem, mem, disk).stop = append(pick(withMem, mem, disk).stop, time.Since(t0))
	}
	for _, withMem := range order {
		for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			st, body, err := cl.Do("GET", "/v1/sandboxes/"+ids[withMem]+"/backups", nil)
			if err == nil && st == 200 {
				if at, ok := readyStopSnap(body, withMem); ok {
					pick(withMem, mem, disk).snap = append(pick(withMem, mem, disk).snap, at.Sub(stopped[withMem]))
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("no stop snapshot of %s: %d %s %v", ids[withMem], st, body, err)
			}
		}
	}
	b.Kill()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		st, body, _ := cl.Do("GET", "/v1/hosts", nil)
		if st == 200 && strings.Contains(string(body), `"state":"lost"`) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("host b (%s) never marked lost: %s", idB, body)
		}
	}
	for _, withMem := range order {
		// Until every ptd sees b lost, a start is forwarded to b and
		// answers 503 at once; the attempt that starts it is timed.
		var t0 time.Time
		var st int
		var body []byte
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			t0 = time.Now()
			st, body, err = cl.Do("POST", "/v1/sandboxes/"+ids[withMem]+"/start?wait_for_state=running&wait_timeout_ms=120000", nil)
			if err == nil && st == 200 {
				break
			}
			if st != 503 || time.Now().After(deadline) {
				return fmt.Errorf("start elsewhere: %d %s %v", st, body, err)
			}
		}
		if _, err := cl.Exec(ids[withMem], []string{"true"}); err != nil {
			return err
		}
		took := time.Since(t0)
		var m struct {
			Restore string `json:"restore"`
		}
		json.Unmarshal(body, &m)
		want := map[bool]string{true: "memory", false: "disk_only"}[withMem]
		if m.Restore != want {
			return fmt.Errorf("start elsewhere of the %s sandbox: restore %q: %s", want, m.Restore, body)
		}
		pick(withMem, mem, disk).start = append(pick(withMem, mem, disk).start, took)
		fmt.Printf("  %-9s stop %8s  stop snapshot %9s  start elsewhere → exec %9s\n", want,
			benchkit.MS(last(pick(withMem, mem, disk).stop)), benchkit.MS(last(pick(withMem, mem, disk).snap)), benchkit.MS(took))
	}
	return nil
}

func pick(withMem bool, mem, disk *timings) *timings {
	if withMem {
		return mem
	}
	return disk
}

func last(ds []time.Duration) time.Duration { return ds[len(ds)-1] }

// readyStopSnap finds a ready pt:stop backup holding memory as wanted and
// returns when it last changed (its upload's end).
func readyStopSnap(body []byte, memory bool) (time.Time, bool) {
	var l struct {
		Backups []struct {
			Name, State string
			Memory      bool      `json:"memory"`
			UpdatedAt   time.Time `json:"updated_at"`
		} `json:"rows"`
	}
	if json.Unmarshal(body, &l) != nil {
		return time.Time{}, false
	}
	for _, bk := range l.Backups {
		if bk.Name == "pt:stop" && bk.State == "ready" && bk.Memory == memory {
			return bk.UpdatedAt, true
		}
	}
	return time.Time{}, false
}
