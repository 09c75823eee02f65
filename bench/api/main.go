// Command api measures how many requests per second ptd's REST API serves
// on loopback: GET /v1/sandboxes/{id} (authentication, the store read and
// the encoding of one record) beside GET /healthz (the HTTP stack alone)
// as the same-run baseline, in alternating rounds so both see the same
// load. With -busy N it first starts N busybox sandboxes that each spin a
// busy loop on every core they have, so the API is measured with the
// host's CPU saturated by sandbox work. It starts its own ptd, so it needs
// root and scripts/setup.sh.
//
//	go run ./bench/api [-c 32] [-round 2s] [-rounds 6] [-busy 0] [-sandbox-cpu-weight 20]
package main

import (
	"flag"
	"fmt"
	"net/http"
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
	var spent [2]time.Duration
	for r := 0; r < *rounds; r++ {
		for i, rt := range routes {
			start := time.Now()
			token := ""
			if rt.auth {
				token = d.Token
			}
			ds, err := benchkit.Hammer(hc, d.URL+rt.path, token, *conns, *round)
			if err != nil {
				return fmt.Errorf("%s: %w", rt.name, err)
			}
			spent[i] += time.Since(start)
			lat[i] = append(lat[i], ds...)
			count[i] += len(ds)
		}
	}
	fmt.Printf("Platinum API throughput: %d connections, %d rounds of %s per route, %d busy sandboxes, sandbox cpu weight %d, %s\n\n",
		*conns, *rounds, *round, *busy, *weight, time.Now().UTC().Format(time.RFC3339))
	rps := func(i int) float64 { return float64(count[i]) / spent[i].Seconds() }
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
	}
	return nil
}
