// Command hosts measures a platform of several hosts on one store
// (docs/ARCHITECTURE.md, "Many hosts"): creates per second and create →
// first exec with one host and with three, both behind the same two api
// processes (--role=api) that clients alternate between, in one run; what
// a forwarded call costs against the same call made to the sandbox's own
// host (the baseline); a start relocated by a full start queue through
// the sandbox's stop snapshot, against a start on its own host; and
// failover, a host's ptd killed → its backed-up sandbox running on another
// host; and a host joined to an api process (--role=host --join, reaching
// the store through it) against one given the store's URL. Five ptd
// processes (six with the joined host) share one throwaway
// PostgreSQL on this machine. "One host" is the three hosts with two of
// them drained: a drained host takes no new sandboxes. It needs root,
// PostgreSQL's server binaries and scripts/setup.sh.
//
//	go run ./bench/hosts [-n 30] [-c 4] [-runtime runc] [-failovers 3] [-joined]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// lostAfter is how long a host may miss heartbeats before it is lost.
const lostAfter = 5 * time.Second

func main() { benchkit.Main("bench/hosts", run) }

func run() error {
	n := flag.Int("n", 30, "creates per configuration")
	conc := flag.Int("c", 4, "clients creating at once")
	runtime := flag.String("runtime", "runc", "runtime class of the sandboxes")
	calls := flag.Int("calls", 200, "GETs (and a quarter as many execs) per path in the forwarding comparison")
	rounds := flag.Int("failovers", 3, "host kills in the failover measurement")
	join := flag.Bool("joined", true, "also compare a host joined to an api process (--role=host --join) with one given the store's URL")
	flag.Parse()

	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	objects, err := os.MkdirTemp("", "pt-bench-objects-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(objects)
	// Backups go to one object store all hosts share.
	args := []string{"--log-level", "warn", "--host-heartbeat", "1s", "--host-lost-after", lostAfter.String(), "--objects", objects}
	var ds []*ptdtest.Daemon
	defer func() {
		for _, d := range ds {
			d.Stop()
		}
	}()
	// Three hosts, then two api processes (--role=api) on their store.
	var cls []*benchkit.Client
	for i := range 5 {
		o := ptdtest.Options{RepoRoot: root, Store: "postgres", ExtraArgs: args}
		if i > 0 {
			o = ptdtest.Options{RepoRoot: root, Store: "sqlite", KeysFrom: ds[0].DataDir, ExtraArgs: append(append([]string{}, args...), "--store", ds[0].StoreURL)}
		}
		if i >= 3 {
			o.ExtraArgs = append(o.ExtraArgs, "--role", "api")
		}
		if i == 3 {
			// The first api process lets a host join it (joined).
			o.Env = []string{"PT_HOST_TOKEN=" + hostToken}
		}
		if i == 2 {
			// Host 3 starts one sandbox at a time and waits 100 ms for a
			// slot, so the relocation measurement can fill it.
			o.ExtraArgs = append(o.ExtraArgs, "--start-admission-slots", "1", "--start-admission-wait", "100ms")
		}
		d, err := ptdtest.Start(o)
		if d != nil {
			ds = append(ds, d)
		}
		if err != nil {
			return fmt.Errorf("ptd %d: %w", i, err)
		}
		cls = append(cls, &benchkit.Client{URL: d.URL, Token: d.Token})
	}
	if err := cls[0].EnsureTemplate("busybox"); err != nil {
		return err
	}
	ids := make([]string, 3)
	for i, d := range ds[:3] {
		b, err := os.ReadFile(filepath.Join(d.DataDir, "host-id"))
		if err != nil {
			return err
		}
		ids[i] = strings.TrimSpace(string(b))
	}
	// drain drains (or undrains) the hosts of the given indexes.
	drain := func(on bool, hosts ...int) error {
		verb := map[bool]string{true: "drain", false: "undrain"}[on]
		for _, i := range hosts {
			if st, b, err := cls[0].Do("POST", "/v1/hosts/"+ids[i]+"/"+verb, nil); err != nil || st != 200 {
				return fmt.Errorf("%s %s: %d %s %v", verb, ids[i], st, b, err)
			}
		}
		return nil
	}
	body := map[string]any{"template": "busybox", "cpu": 1, "ram_mb": 512, "disk_gb": 1, "runtime": *runtime}
	entries := cls[3:]
	fmt.Printf("create → first exec, busybox on %s, %d creates per configuration, %d at once, clients alternating between 2 api processes\n", *runtime, *n, *conc)

	if err := drain(true, 1, 2); err != nil {
		return err
	}
	one, rate1, where1, err := burst(entries, body, *n, *conc)
	if err != nil {
		return fmt.Errorf("one host: %w", err)
	}
	if err := drain(false, 1, 2); err != nil {
		return err
	}
	three, rate3, where3, err := burst(entries, body, *n, *conc)
	if err != nil {
		return fmt.Errorf("three hosts: %w", err)
	}
	benchkit.Report("1 host: create → first exec (baseline)", one, nil)
	benchkit.Report("3 hosts: create → first exec", three, one)
	fmt.Printf("creates per second: 1 host %.2f, 3 hosts %.2f (%.2fx)\n", rate1, rate3, rate3/rate1)
	fmt.Printf("placement: 1 host %s; 3 hosts %s\n", spread(where1, ids), spread(where3, ids))

	// The cost of a hop: the same sandbox read and exec'd through its own
	// host's ptd (baseline) and through an api process, alternating.
	id, err := cls[2].Create("busybox")
	if err != nil {
		return err
	}
	defer cls[2].Delete(id)
	if _, b, _ := cls[0].Do("GET", "/v1/sandboxes/"+id, nil); !strings.Contains(string(b), ids[2]) {
		return fmt.Errorf("the comparison's sandbox is not on host 3: %s", b)
	}
	var getDirect, getFwd, execDirect, execFwd []time.Duration
	for i := range *calls {
		for _, p := range []struct {
			c   *benchkit.Client
			get *[]time.Duration
			ex  *[]time.Duration
		}{{cls[2], &getDirect, &execDirect}, {cls[3], &getFwd, &execFwd}} {
			t0 := time.Now()
			if st, b, err := p.c.Do("GET", "/v1/sandboxes/"+id, nil); err != nil || st != 200 {
				return fmt.Errorf("get: %d %s %v", st, b, err)
			}
			*p.get = append(*p.get, time.Since(t0))
			if i%4 == 0 {
				t0 = time.Now()
				if _, err := p.c.Exec(id, []string{"true"}); err != nil {
					return err
				}
				*p.ex = append(*p.ex, time.Since(t0))
			}
		}
	}
	benchkit.Report("GET through its host's ptd (baseline)", getDirect, nil)
	benchkit.Report("GET through an api process (forwarded)", getFwd, getDirect)
	benchkit.Report("exec through its host's ptd (baseline)", execDirect, nil)
	benchkit.Report("exec through an api process (forwarded)", execFwd, execDirect)
	if err := relocation(cls, ids, *rounds, drain); err != nil {
		return err
	}
	if err := failover(ds[2], cls, ids, *rounds, drain); err != nil {
		return err
	}
	if !*join {
		return nil
	}
	j, err := ptdtest.Start(ptdtest.Options{RepoRoot: root, Store: "sqlite", Env: []string{"PT_HOST_TOKEN=" + hostToken},
		ExtraArgs: append(append([]string{}, args...), "--role", "host", "--join", ds[3].URL)})
	if j != nil {
		ds = append(ds, j)
	}
	if err != nil {
		return fmt.Errorf("joined host: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(j.DataDir, "host-id"))
	if err != nil {
		return err
	}
	ids = append(ids, strings.TrimSpace(string(b)))
	cls = append(cls, &benchkit.Client{URL: j.URL, Token: ds[0].Token})
	return joined(cls, ids, body, *n, *calls, drain)
}

// hostToken lets the joined host in.
const hostToken = "bench-hosts-0123456789abcdef0123456789"

// joined compares a host that reaches the store through an api process
// (--role=host --join, its sixth ptd: cls[5], ids[3]) with host 3, which
// has the store's URL (the baseline), alternating: create → first exec
// through each host's own ptd with only that host taking sandboxes, and
// GET and exec of a sandbox on each through its own ptd.
func joined(cls []*benchkit.Client, ids []string, body map[string]any, n, calls int, drain func(bool, ...int) error) error {
	if err := drain(true, 0, 1); err != nil {
		return err
	}
	defer drain(false, 0, 1)
	hosts := []struct {
		c   *benchkit.Client
		idx int
	}{{cls[2], 2}, {cls[5], 3}}
	create := make([][]time.Duration, 2)
	for range n {
		for k, h := range hosts {
			if err := errors.Join(drain(true, hosts[1-k].idx), drain(false, h.idx)); err != nil {
				return err
			}
			t0 := time.Now()
			id, err := h.c.CreateRunning("busybox", body)
			if err == nil {
				_, err = h.c.Exec(id, []string{"true"})
			}
			create[k] = append(create[k], time.Since(t0))
			if id != "" {
				if where := hostOf(h.c, id); where != ids[h.idx] && err == nil {
					err = fmt.Errorf("sandbox %s placed on %s, not %s", id, where, ids[h.idx])
				}
				h.c.Delete(id)
			}
			if err != nil {
				return err
			}
		}
	}
	if err := drain(false, 2); err != nil {
		return err
	}
	get, exec := make([][]time.Duration, 2), make([][]time.Duration, 2)
	sbs := make([]string, 2)
	for k, h := range hosts {
		if err := errors.Join(drain(true, hosts[1-k].idx), drain(false, h.idx)); err != nil {
			return err
		}
		id, err := h.c.CreateRunning("busybox", body)
		if err != nil {
			return err
		}
		defer h.c.Delete(id)
		sbs[k] = id
	}
	if err := drain(false, 2, 3); err != nil {
		return err
	}
	for i := range calls {
		for k, h := range hosts {
			t0 := time.Now()
			if st, b, err := h.c.Do("GET", "/v1/sandboxes/"+sbs[k], nil); err != nil || st != 200 {
				return fmt.Errorf("get: %d %s %v", st, b, err)
			}
			get[k] = append(get[k], time.Since(t0))
			if i%4 == 0 {
				t0 = time.Now()
				if _, err := h.c.Exec(sbs[k], []string{"true"}); err != nil {
					return err
				}
				exec[k] = append(exec[k], time.Since(t0))
			}
		}
	}
	fmt.Printf("a host with the store's URL (baseline) and a host joined to an api process, each through its own ptd, alternating:\n")
	benchkit.Report("store's URL: create → first exec (baseline)", create[0], nil)
	benchkit.Report("joined: create → first exec", create[1], create[0])
	benchkit.Report("store's URL: GET (baseline)", get[0], nil)
	benchkit.Report("joined: GET", get[1], get[0])
	benchkit.Report("store's URL: exec (baseline)", exec[0], nil)
	benchkit.Report("joined: exec", exec[1], exec[0])
	return nil
}

// relocation times a start of a stopped 1 GB sandbox holding 256 MB of
// fresh data that host 3's full start queue relocates to another host
// through its stop snapshot (start call → running elsewhere), beside the
// baseline: a start of the same sandbox on the host it is on.
func relocation(cls []*benchkit.Client, ids []string, rounds int, drain func(bool, ...int) error) error {
	var moved, local []time.Duration
	api := cls[3]
	stop := func(id string) error {
		if st, b, err := api.Do("POST", "/v1/sandboxes/"+id+"/stop?memory=false&wait_for_state=stopped", nil); err != nil || st != 200 {
			return fmt.Errorf("stop %s: %d %s %v", id, st, b, err)
		}
		return nil
	}
	waitRunning := func(id string, t0 time.Time) (time.Duration, string, error) {
		for deadline := t0.Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			_, b, _ := api.Do("GET", "/v1/sandboxes/"+id, nil)
			var sb struct {
				State  string
				HostID string `json:"host_id"`
			}
			json.Unmarshal(b, &sb)
			if sb.State == "running" {
				return time.Since(t0), sb.HostID, nil
			}
		}
		return 0, "", fmt.Errorf("sandbox %s never ran again", id)
	}
	// stopSnapshot waits for a ready stop snapshot of id other than prev.
	stopSnapshot := func(id, prev string) (string, error) {
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			_, b, _ := api.Do("GET", "/v1/sandboxes/"+id+"/backups", nil)
			var bks struct {
				Rows []struct{ ID, Name, State string }
			}
			json.Unmarshal(b, &bks)
			for _, bk := range bks.Rows {
				if bk.Name == "pt:stop" && bk.State == "ready" && bk.ID != prev {
					return bk.ID, nil
				}
			}
		}
		return "", fmt.Errorf("no new stop snapshot of %s", id)
	}
	for range rounds {
		if err := drain(true, 0, 1); err != nil {
			return err
		}
		blocker, berr := api.CreateRunning("gvisor busybox", map[string]any{"template": "busybox", "runtime": "gvisor"})
		id, err := api.CreateRunning("busybox", map[string]any{"template": "busybox", "disk_gb": 1})
		if err := drain(false, 0, 1); err != nil {
			return err
		}
		if err = errors.Join(berr, err); err != nil {
			return err
		}
		if _, err := api.Exec(id, []string{"sh", "-c", "head -c 268435456 /dev/urandom > /root/data && sync"}); err != nil {
			return err
		}
		for _, x := range []string{blocker, id} {
			if err := stop(x); err != nil {
				return err
			}
		}
		snap, err := stopSnapshot(id, "")
		if err != nil {
			return err
		}
		// Baseline: the same sandbox started where it is, then stopped.
		t0 := time.Now()
		if st, b, err := api.Do("POST", "/v1/sandboxes/"+id+"/start", nil); err != nil || st != 200 {
			return fmt.Errorf("start %s: %d %s %v", id, st, b, err)
		}
		d, _, err := waitRunning(id, t0)
		if err != nil {
			return err
		}
		local = append(local, d)
		if err := stop(id); err != nil {
			return err
		}
		if _, err := stopSnapshot(id, snap); err != nil {
			return err
		}
		// The gVisor cold start holds host 3's one slot.
		if st, b, err := api.Do("POST", "/v1/sandboxes/"+blocker+"/start", nil); err != nil || st != 200 {
			return fmt.Errorf("start the blocker: %d %s %v", st, b, err)
		}
		t0 = time.Now()
		st, b, err := api.Do("POST", "/v1/sandboxes/"+id+"/start", nil)
		if err != nil || st != 202 || !strings.Contains(string(b), `"code":"relocating"`) {
			return fmt.Errorf("start on a full host: %d %s %v, want 202 relocating", st, b, err)
		}
		d, host, err := waitRunning(id, t0)
		if err != nil {
			return err
		}
		if host == ids[2] {
			return fmt.Errorf("sandbox %s did not move", id)
		}
		moved = append(moved, d)
		api.Delete(id)
		api.Delete(blocker)
	}
	fmt.Printf("start of a stopped 1 GB sandbox holding 256 MB written since its template, %d rounds:\n", rounds)
	benchkit.Report("start on its own host (baseline)", local, nil)
	benchkit.Report("start relocated through its stop snapshot", moved, local)
	return nil
}

// failover kills host 3's ptd with a backed-up sandbox on it, rounds
// times, and times the kill → the sandbox running on another host, and
// the part of it after the host was marked lost (the restore from the
// backup and the boot); host 3 comes back between rounds.
func failover(d *ptdtest.Daemon, cls []*benchkit.Client, ids []string, rounds int, drain func(bool, ...int) error) error {
	var total, restore []time.Duration
	for range rounds {
		// Hosts 1 and 2 drained while it is made, so it lands on 3.
		if err := drain(true, 0, 1); err != nil {
			return err
		}
		id, err := cls[2].Create("busybox")
		if err := drain(false, 0, 1); err != nil {
			return err
		}
		if err != nil {
			return err
		}
		if h := hostOf(cls[0], id); h != ids[2] {
			cls[0].Delete(id)
			return fmt.Errorf("the failover sandbox went to %s, not host 3", h)
		}
		st, b, err := cls[0].Do("POST", "/v1/sandboxes/"+id+"/backups", map[string]any{})
		if err != nil || st != 202 {
			return fmt.Errorf("backup: %d %s %v", st, b, err)
		}
		var bk struct{ ID string }
		json.Unmarshal(b, &bk)
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			_, b, _ := cls[0].Do("GET", "/v1/snapshots/"+bk.ID, nil)
			if strings.Contains(string(b), `"state":"ready"`) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("backup %s never ready: %s", bk.ID, b)
			}
		}
		d.Kill()
		t0 := time.Now()
		var lostAt time.Time
		for deadline := t0.Add(3 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if lostAt.IsZero() {
				if hostState(cls[0], ids[2]) == "lost" {
					lostAt = time.Now()
				}
			}
			_, b, _ := cls[0].Do("GET", "/v1/sandboxes/"+id, nil)
			var sb struct {
				State  string
				HostID string `json:"host_id"`
			}
			json.Unmarshal(b, &sb)
			if sb.State == "running" && sb.HostID != ids[2] {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("sandbox %s never ran elsewhere: %s", id, b)
			}
		}
		total = append(total, time.Since(t0))
		if !lostAt.IsZero() {
			restore = append(restore, time.Since(lostAt))
		}
		cls[0].Delete(id)
		if err := d.Restart(); err != nil {
			return err
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if hostState(cls[0], ids[2]) == "active" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("host 3 never active again")
			}
		}
	}
	fmt.Printf("failover of a backed-up busybox sandbox (--host-lost-after %s), %d rounds:\n", lostAfter, rounds)
	benchkit.Report("host kill → running on another host", total, nil)
	benchkit.Report("marked lost → running (restore + boot)", restore, nil)
	return nil
}

// burst makes n sandboxes, conc at a time, each through the next entry
// in turn, timing create (to running) → first exec; it returns those
// times, creates per second over the whole burst, and the host of each.
// The sandboxes are deleted afterwards, and the teardown waited for.
func burst(entries []*benchkit.Client, body map[string]any, n, conc int) ([]time.Duration, float64, []string, error) {
	var (
		mu    sync.Mutex
		times []time.Duration
		hosts []string
		made  []string
		first error
	)
	jobs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for i := range jobs {
				c := entries[i%len(entries)]
				t0 := time.Now()
				id, err := c.CreateRunning("busybox", body)
				if err == nil {
					_, err = c.Exec(id, []string{"true"})
				}
				d := time.Since(t0)
				mu.Lock()
				if id != "" {
					made = append(made, id)
				}
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					times = append(times, d)
					hosts = append(hosts, hostOf(c, id))
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	rate := float64(len(times)) / time.Since(start).Seconds()
	for _, id := range made {
		entries[0].Delete(id)
	}
	for _, id := range made {
		entries[0].WaitGone(id)
	}
	return times, rate, hosts, first
}

func hostOf(c *benchkit.Client, id string) string {
	_, b, _ := c.Do("GET", "/v1/sandboxes/"+id, nil)
	var m struct {
		HostID string `json:"host_id"`
	}
	json.Unmarshal(b, &m)
	return m.HostID
}

// hostState is host id's state in GET /v1/hosts.
func hostState(c *benchkit.Client, id string) string {
	_, b, _ := c.Do("GET", "/v1/hosts", nil)
	var m struct {
		Rows []struct{ ID, State string }
	}
	json.Unmarshal(b, &m)
	for _, r := range m.Rows {
		if r.ID == id {
			return r.State
		}
	}
	return ""
}

// spread counts placements per host, in the hosts' order.
func spread(where []string, ids []string) string {
	var parts []string
	for i, id := range ids {
		k := 0
		for _, w := range where {
			if w == id {
				k++
			}
		}
		parts = append(parts, fmt.Sprintf("host %d: %d", i+1, k))
	}
	return strings.Join(parts, ", ")
}
