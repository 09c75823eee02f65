// Command api measures how many requests per second ptd's REST API serves
// on loopback: GET /v1/sandboxes/{id} (authentication, the store read and
// the encoding of one record) beside GET /healthz (the HTTP stack alone)
// as the same-run baseline, in alternating rounds so both see the same
// load, and ptd's own CPU time per request of each (which other load on
// the machine moves far less than requests/s). With -busy N it first starts N busybox sandboxes that each spin a
// busy loop on every core they have, so the API is measured with the
// host's CPU saturated by sandbox work. It starts its own ptd, so it needs
// root and scripts/setup.sh.
//
//	go run ./bench/api [-c 32] [-round 2s] [-rounds 6] [-busy 0] [-sandbox-cpu-weight 20]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
)

func main() { benchkit.Main("bench/api", run) }

func run() error {
	conns := flag.Int("c", 32, "concurrent connections")
	round := flag.Duration("round", 2*time.Second, "length of one round of one route")
	rounds := flag.Int("rounds", 6, "rounds per route, alternating between them")
	busy := flag.Int("busy", 0, "sandboxes spinning a busy loop during the measurement")
	weight := flag.Int("sandbox-cpu-weight", 20, "ptd's --sandbox-cpu-weight (0 leaves the sandboxes' cgroup at the default weight)")
	flag.Parse()
	d, c, err := benchkit.StartPtd("--log-level", "warn", "--sandbox-cpu-weight", fmt.Sprint(*weight))
	defer d.Stop()
	if err != nil {
		return err
	}
	id, err := c.EnsureCreate("busybox")
	if err != nil {
		return err
	}
	defer c.Delete(id)
	for range *busy {
		bid, err := c.Create("busybox")
		if err != nil {
			return err
		}
		defer c.Delete(bid)
		// Two spinning shells: the sandbox's whole CPU allowance on 2 cores.
		for range 2 {
			if st, b, err := c.Do("POST", "/v1/sandboxes/"+bid+"/processes", map[string]any{"cmd": "while :; do :; done"}); err != nil || st != 201 {
				return fmt.Errorf("busy loop: %d %s %v", st, b, err)
			}
		}
	}

	tr := &http.Transport{MaxIdleConns: *conns, MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	routes := []struct {
		name, path string
		auth       bool
	}{
		{"GET /healthz (baseline)", "/healthz", false},
		{"GET /v1/sandboxes/{id}", "/v1/sandboxes/" + id, true},
	}
	lat := make([][]time.Duration, len(routes))
	count := make([]int, len(routes))
	var spent, cpu [2]time.Duration
	for r := 0; r < *rounds; r++ {
		for i, rt := range routes {
			start := time.Now()
			token := ""
			if rt.auth {
				token = d.Token
			}
			cpu0, err := processCPU(d.PID())
			if err != nil {
				return err
			}
			ds, err := benchkit.Hammer(hc, d.URL+rt.path, token, *conns, *round)
			if err != nil {
				return fmt.Errorf("%s: %w", rt.name, err)
			}
			spent[i] += time.Since(start)
			cpu1, err := processCPU(d.PID())
			if err != nil {
				return err
			}
			cpu[i] += cpu1 - cpu0
			lat[i] = append(lat[i], ds...)
			count[i] += len(ds)
		}
	}
	fmt.Printf("Platinum API throughput: %d connections, %d rounds of %s per route, %d busy sandboxes, sandbox cpu weight %d, %s\n\n",
		*conns, *rounds, *round, *busy, *weight, time.Now().UTC().Format(time.RFC3339))
	rps := func(i int) float64 { return float64(count[i]) / spent[i].Seconds() }
	cpuPer := func(i int) time.Duration { return cpu[i] / time.Duration(max(count[i], 1)) }
	for i, rt := range routes {
		var base []time.Duration
		if i > 0 {
			base = lat[0]
		}
		benchkit.Report(rt.name, lat[i], base)
		fmt.Printf("%-42s %.0f requests/s", "", rps(i))
		if i > 0 {
			fmt.Printf("   %.2f of the baseline's", rps(i)/rps(0))
		}
		fmt.Println()
		// ptd's own CPU time per request counts what other load on the
		// machine does not: requests/s move with it, this hardly does.
		fmt.Printf("%-42s ptd CPU %.1f µs a request", "", cpuPer(i).Seconds()*1e6)
		if i > 0 {
			fmt.Printf("   %.2fx the baseline's (+%.1f µs)", cpuPer(i).Seconds()/cpuPer(0).Seconds(), (cpuPer(i)-cpuPer(0)).Seconds()*1e6)
		}
		fmt.Println()
	}
	return nil
}

// processCPU is the user and system CPU time process pid has used, from
// /proc/<pid>/stat (in clock ticks of 1/100 s, Linux's USER_HZ).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields count from its ")".
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] { // utime and stime, fields 14 and 15
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}
