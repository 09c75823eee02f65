package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
)

// Config is one load run.
type Config struct {
	// Creates is how many sandboxes are created, all at once at the
	// start, alternating between Classes.
	Creates int
	// Clients is how many API clients list, get, exec and upload for the
	// whole Duration.
	Clients int
	// Duration is how long the clients run, from the start; creates still
	// on their way then are waited for (up to Grace).
	Duration time.Duration
	// Grace bounds the wait for creates past Duration, and again the wait
	// for every sandbox to be deleted at the end.
	Grace time.Duration
	// Classes are the runtime classes creates alternate between.
	Classes []string
	// Template, CPU, RAMMB and DiskGB size every sandbox.
	Template string
	CPU      float64
	RAMMB    int
	DiskGB   int
	// UploadBytes is the size of one upload.
	UploadBytes int
}

// DefaultConfig is the run the issue asks for: 200 busybox creates across
// runc and gVisor while 100 clients work for ten minutes.
func DefaultConfig() Config {
	return Config{Creates: 200, Clients: 100, Duration: 10 * time.Minute, Grace: 10 * time.Minute,
		Classes: []string{"runc", "gvisor"}, Template: "busybox", CPU: 0.5, RAMMB: 256, DiskGB: 1, UploadBytes: 4 << 10}
}

// Target is the ptd under load and what names its host resources.
type Target struct {
	URL, Token string
	// DataDir, Bridge and Cgroup are the daemon's --data-dir, --bridge and
	// --cgroup-parent, for the leak checks.
	DataDir, Bridge, Cgroup string
	// PID is ptd's own process, which the process check leaves out.
	PID int
}

// The operations a run times.
const (
	opCreate = "create"
	opList   = "list"
	opGet    = "get"
	opExec   = "exec"
	opUpload = "upload"
	opDelete = "delete"
)

// stat is one operation's record.
type stat struct {
	mu    sync.Mutex
	lat   []time.Duration // of calls answered 2xx
	codes map[string]int  // status code (or "transport") → count
	// samples keeps the first answers of each unexpected code.
	samples map[string]string
}

func (s *stat) add(code string, d time.Duration, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code]++
	if strings.HasPrefix(code, "2") {
		s.lat = append(s.lat, d)
	} else if _, ok := s.samples[code]; !ok {
		s.samples[code] = strings.TrimSpace(string(body))
	}
}

// Report is what a run measured and found.
type Report struct {
	Config  Config
	Started time.Time
	// Elapsed is from the first create to the end of the clients.
	Elapsed time.Duration
	Ops     map[string]*stat
	// Created counts the sandboxes that reached running, by class;
	// Failed those that ended failed (with their reasons).
	Created map[string]int
	Failed  []string
	// Stuck are sandboxes not deleted within Grace after their delete.
	Stuck []string
	// Leaks are host resources still naming a sandbox after it was
	// deleted, or runtime processes of the data dir no sandbox owns.
	Leaks []string
}

// allowed reports whether a status code is one the API documents for a
// busy host: 2xx, 429 (quota) and 503 (capacity).
func allowed(code string) bool {
	return strings.HasPrefix(code, "2") || code == "429" || code == "503"
}

// Unexpected lists every answer that is neither success nor a documented
// refusal, and every create that did not end running.
func (r *Report) Unexpected() []string {
	var out []string
	for _, op := range []string{opCreate, opList, opGet, opExec, opUpload, opDelete} {
		s := r.Ops[op]
		for code, n := range s.codes {
			if !allowed(code) {
				out = append(out, fmt.Sprintf("%s: %d × %s (%.300s)", op, n, code, s.samples[code]))
			}
		}
	}
	for _, f := range r.Failed {
		out = append(out, "create ended failed: "+f)
	}
	sort.Strings(out)
	return out
}

// OK reports whether the run found nothing wrong.
func (r *Report) OK() bool {
	return len(r.Unexpected()) == 0 && len(r.Stuck) == 0 && len(r.Leaks) == 0
}

// Print writes the report.
func (r *Report) Print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "Platinum load run %s: %d creates (%s, %s, %g cpu, %d MB, %d GB) while %d API clients list, get, exec and upload for %s\n\n",
		r.Started.UTC().Format(time.RFC3339), c.Creates, strings.Join(c.Classes, "+"), c.Template, c.CPU, c.RAMMB, c.DiskGB,
		c.Clients, c.Duration)
	fmt.Fprintf(w, "%-8s %7s %9s %10s %10s %10s  %s\n", "op", "n", "per s", "p50", "p95", "p99", "answers")
	for _, op := range []string{opCreate, opList, opGet, opExec, opUpload, opDelete} {
		s := r.Ops[op]
		total := 0
		var codes []string
		for code, n := range s.codes {
			total += n
			codes = append(codes, fmt.Sprintf("%s×%d", code, n))
		}
		sort.Strings(codes)
		if total == 0 {
			fmt.Fprintf(w, "%-8s %7d\n", op, 0)
			continue
		}
		p := [3]time.Duration{}
		if len(s.lat) > 0 {
			p = benchkit.Percentiles(s.lat)
		}
		per := float64(total) / r.Elapsed.Seconds()
		fmt.Fprintf(w, "%-8s %7d %9.1f %10s %10s %10s  %s\n", op, total, per, benchkit.MS(p[0]), benchkit.MS(p[1]), benchkit.MS(p[2]),
			strings.Join(codes, " "))
	}
	var classes []string
	for cl, n := range r.Created {
		classes = append(classes, fmt.Sprintf("%s %d", cl, n))
	}
	sort.Strings(classes)
	fmt.Fprintf(w, "\nrunning: %s; failed: %d; stuck after delete: %d; leaks: %d\n", strings.Join(classes, ", "), len(r.Failed), len(r.Stuck), len(r.Leaks))
	for _, s := range r.Unexpected() {
		fmt.Fprintln(w, "UNEXPECTED", s)
	}
	for _, s := range r.Stuck {
		fmt.Fprintln(w, "STUCK", s)
	}
	for _, s := range r.Leaks {
		fmt.Fprintln(w, "LEAK", s)
	}
	if r.OK() {
		fmt.Fprintln(w, "verdict: ok (only 2xx, 429 and 503; every sandbox deleted; nothing left on the host)")
	} else {
		fmt.Fprintln(w, "verdict: FAILED")
	}
}

// runner is one run in progress.
type runner struct {
	cfg Config
	t   Target
	hc  *http.Client
	rep *Report

	mu      sync.Mutex
	all     []string // every sandbox a create made, running or not
	running []string // those that reached running
	class   map[string]string
}

// Run drives the load against t and checks the host afterwards.
func Run(ctx context.Context, cfg Config, t Target) (*Report, error) {
	tr := &http.Transport{MaxIdleConns: cfg.Clients + cfg.Creates, MaxIdleConnsPerHost: cfg.Clients + cfg.Creates}
	defer tr.CloseIdleConnections()
	r := &runner{cfg: cfg, t: t, hc: &http.Client{Transport: tr}, class: map[string]string{},
		rep: &Report{Config: cfg, Ops: map[string]*stat{}, Created: map[string]int{}}}
	for _, op := range []string{opCreate, opList, opGet, opExec, opUpload, opDelete} {
		r.rep.Ops[op] = &stat{codes: map[string]int{}, samples: map[string]string{}}
	}
	bk := &benchkit.Client{URL: t.URL, Token: t.Token}
	if err := bk.EnsureTemplate(cfg.Template); err != nil {
		return nil, err
	}
	baseline := runtimeProcesses(t)

	r.rep.Started = time.Now()
	end := r.rep.Started.Add(cfg.Duration)
	clientsCtx, stopClients := context.WithDeadline(ctx, end)
	defer stopClients()
	var clients sync.WaitGroup
	for i := range cfg.Clients {
		clients.Go(func() {
			r.client(clientsCtx, i)
		})
	}
	createCtx, stopCreates := context.WithDeadline(ctx, end.Add(cfg.Grace))
	defer stopCreates()
	var creates sync.WaitGroup
	for i := range cfg.Creates {
		creates.Go(func() {
			r.create(createCtx, cfg.Classes[i%len(cfg.Classes)])
		})
	}
	clients.Wait()
	r.rep.Elapsed = time.Since(r.rep.Started)
	creates.Wait()
	if err := ctx.Err(); err != nil {
		return r.rep, err
	}
	r.deleteAll(ctx)
	for _, l := range leaks(t, r.all, baseline) {
		id, _, _ := strings.Cut(l, ":")
		if c := r.class[id]; c != "" {
			l = id + " (" + c + ")" + strings.TrimPrefix(l, id)
		}
		r.rep.Leaks = append(r.rep.Leaks, l)
	}
	return r.rep, nil
}

// send sends one request.
func (r *runner) send(ctx context.Context, method, path string, body []byte, ctype string) (int, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.t.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.t.Token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

// call sends one request and records it under op (a call the end of the
// run cut short is not recorded).
func (r *runner) call(ctx context.Context, op, method, path string, body []byte, ctype string) (int, []byte, http.Header) {
	t0 := time.Now()
	code, b, h, err := r.send(ctx, method, path, body, ctype)
	if ctx.Err() != nil {
		return 0, nil, nil
	}
	if err != nil {
		r.rep.Ops[op].add("transport", time.Since(t0), []byte(err.Error()))
		return 0, nil, nil
	}
	r.rep.Ops[op].add(strconv.Itoa(code), time.Since(t0), b)
	return code, b, h
}

type sbView struct {
	ID           string `json:"id"`
	State        string `json:"state"`
	Reason       string `json:"reason"`
	WaitTimedOut bool   `json:"wait_timed_out"`
}

// create makes one sandbox and waits until it runs, retrying documented
// refusals (429, 503) after their Retry-After as the SDKs do. Its time is
// from the first request to running; each refusal is counted too.
func (r *runner) create(ctx context.Context, class string) {
	body, _ := json.Marshal(map[string]any{"template": r.cfg.Template, "runtime": class, "cpu": r.cfg.CPU,
		"ram_mb": r.cfg.RAMMB, "disk_gb": r.cfg.DiskGB})
	st := r.rep.Ops[opCreate]
	t0 := time.Now()
	var sb sbView
	for {
		code, b, h, err := r.send(ctx, "POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=600000", body, "application/json")
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			st.add("transport", 0, []byte(err.Error()))
			return
		case code == 429 || code == 503:
			st.add(strconv.Itoa(code), 0, b)
			wait, _ := strconv.Atoi(h.Get("Retry-After"))
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(max(wait, 1)) * time.Second):
			}
			continue
		case code != 201 && code != 202:
			st.add(strconv.Itoa(code), 0, b)
			return
		}
		json.Unmarshal(b, &sb)
		break
	}
	r.mu.Lock()
	r.all = append(r.all, sb.ID)
	r.class[sb.ID] = class
	r.mu.Unlock()
	// A wait that ran out (202) goes on with reads every 2 s.
	for sb.State != "running" && sb.State != "failed" && ctx.Err() == nil {
		time.Sleep(2 * time.Second)
		if code, b, _, err := r.send(ctx, "GET", "/v1/sandboxes/"+sb.ID, nil, ""); err == nil && code == 200 {
			json.Unmarshal(b, &sb)
		}
	}
	switch sb.State {
	case "running":
		st.add("201", time.Since(t0), nil)
		r.mu.Lock()
		r.running = append(r.running, sb.ID)
		r.rep.Created[class]++
		r.mu.Unlock()
	case "failed":
		r.mu.Lock()
		r.rep.Failed = append(r.rep.Failed, fmt.Sprintf("%s (%s): %s", sb.ID, class, sb.Reason))
		r.mu.Unlock()
	default:
		r.mu.Lock()
		r.rep.Failed = append(r.rep.Failed, fmt.Sprintf("%s (%s): still %s when the run ended", sb.ID, class, sb.State))
		r.mu.Unlock()
	}
}

// client is one API client: until ctx ends it lists, or picks a running
// sandbox and gets it, runs a command in it or uploads a file to it.
func (r *runner) client(ctx context.Context, n int) {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(time.Now().UnixNano())))
	payload := bytes.Repeat([]byte("x"), r.cfg.UploadBytes)
	for i := 0; ctx.Err() == nil; i++ {
		r.mu.Lock()
		var id string
		if len(r.running) > 0 {
			id = r.running[rng.IntN(len(r.running))]
		}
		r.mu.Unlock()
		op := opList
		if id != "" {
			op = []string{opList, opGet, opExec, opUpload}[rng.IntN(4)]
		}
		switch op {
		case opList:
			r.call(ctx, op, "GET", "/v1/sandboxes?limit=50", nil, "")
		case opGet:
			r.call(ctx, op, "GET", "/v1/sandboxes/"+id, nil, "")
		case opExec:
			r.call(ctx, op, "POST", "/v1/sandboxes/"+id+"/exec", []byte(`{"cmd":["echo","load"]}`), "application/json")
		case opUpload:
			r.call(ctx, op, "PUT", fmt.Sprintf("/v1/sandboxes/%s/files?path=/tmp/load-%d-%d", id, n, i%8), payload, "application/octet-stream")
		}
		if id == "" { // nothing runs yet: do not spin on the list
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// deleteAll deletes every sandbox the run made, 16 at a time, each timed
// to the end of its teardown (state deleted), and waits up to Grace for
// each; those that do not get there are stuck.
func (r *runner) deleteAll(ctx context.Context) {
	st := r.rep.Ops[opDelete]
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	deadline := time.Now().Add(r.cfg.Grace)
	for _, id := range slices.Clone(r.all) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t0 := time.Now()
			code, b, _, err := r.send(ctx, "DELETE", "/v1/sandboxes/"+id, nil, "")
			if err != nil || (code != 202 && code != 200) {
				st.add(strconv.Itoa(code), time.Since(t0), fmt.Appendf(b, " %v", err))
				mu.Lock()
				r.rep.Stuck = append(r.rep.Stuck, fmt.Sprintf("%s: delete answered %d %s %v", id, code, b, err))
				mu.Unlock()
				return
			}
			var sb sbView
			json.Unmarshal(b, &sb)
			for sb.State != "deleted" && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(time.Second)
				if code, b, _, err := r.send(ctx, "GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil, ""); err == nil && code == 200 {
					json.Unmarshal(b, &sb)
				}
			}
			if sb.State == "deleted" {
				st.add("202", time.Since(t0), nil)
				return
			}
			mu.Lock()
			r.rep.Stuck = append(r.rep.Stuck, fmt.Sprintf("%s (%s): still %s %q %s after its delete", id, r.class[id], sb.State, sb.Reason, r.cfg.Grace))
			mu.Unlock()
		}()
	}
	wg.Wait()
}
