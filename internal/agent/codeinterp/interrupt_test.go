package codeinterp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/testenv"
)

// server is server.py running on the host for a test, with no Python
// kernel at boot: JavaScript, TypeScript and bash contexts need only node
// and bash.
type server struct {
	url    string
	stderr *syncBuffer
}

// syncBuffer is the server's stderr, written by its process's pipe
// copier and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func startServer(t *testing.T) *server {
	t.Helper()
	for _, cmd := range []string{"python3", "node", "bash"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Skipf("no %s", cmd)
		}
	}
	dir := t.TempDir()
	if err := Install(dir); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("python3", filepath.Join(dir, "server.py"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("PT_CODE_PORT=%d", port), "PT_CODE_PREWARM=0",
		"PT_CODE_ENV_FILE="+filepath.Join(dir, "env.json"), "HOME="+dir)
	errBuf := &syncBuffer{}
	cmd.Stderr = errBuf // the server's, repl.js's and the kernels' stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// SIGTERM: the server kills its contexts' processes (each in a
		// session of its own) and exits.
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			b := errBuf.String()
			t.Logf("server stderr (its end):\n%s", b[max(0, len(b)-4000):])
		}
	})
	s := &server{url: fmt.Sprintf("http://127.0.0.1:%d", port), stderr: errBuf}
	for i := 0; ; i++ {
		resp, err := http.Get(s.url + "/v1/health")
		if err == nil {
			resp.Body.Close()
			return s
		}
		if i > 300 {
			t.Fatalf("the server did not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type event struct {
	Type   string         `json:"type"`
	Name   string         `json:"name"`
	Value  string         `json:"value"`
	Text   string         `json:"text"`
	Reason string         `json:"reason"`
	Status string         `json:"status"`
	Data   map[string]any `json:"data"`
}

func (s *server) post(path string, body any) (*http.Response, error) {
	b, _ := json.Marshal(body)
	return http.Post(s.url+path, "application/json", bytes.NewReader(b))
}

// run runs one cell and returns its events.
func (s *server) run(t *testing.T, body map[string]any) []event {
	t.Helper()
	resp, err := s.post("/v1/execute", body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event %q: %v", sc.Bytes(), err)
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != "end" {
		t.Fatalf("no end: %+v", evs)
	}
	return evs
}

// TestInterruptsNeverEndAContext: interrupts that land anywhere in or
// around a context's cells (a cell's start and end included) stop at most
// the cell they were for; the context's process lives on with its state.
// The JavaScript REPL was killed by a SIGINT landing where node had no
// handler for it (the moment breakOnSigint's watchdog starts or stops).
func TestInterruptsNeverEndAContext(t *testing.T) {
	s := startServer(t)
	cells := 1000
	if testing.Short() {
		cells = 100
	}
	for _, tc := range []struct{ lang, set, cell, check, want string }{
		{"javascript", "var kept = 'kept'", "for (let i = 0; i < 1e5; i++) {}", "kept", "'kept'"},
		{"javascript", "var kept = 'kept'", "Promise.resolve(1)", "kept", "'kept'"},
		{"javascript", "var kept = 'kept'", "let n = 0", "kept", "'kept'"},
		{"typescript", "const kept: string = 'kept'", "let n: number = 0; for (let i = 0; i < 1e5; i++) { n++ }", "kept", "'kept'"},
		{"bash", "KEPT=kept", "N=$((N+1))", "echo $KEPT", "kept\n"},
		{"python", "kept = 'kept'", "n = sum(range(1000))", "kept", "'kept'"},
	} {
		t.Run(tc.lang+" "+tc.cell, func(t *testing.T) {
			if tc.lang == "typescript" && exec.Command("node", "-e", "require('typescript')").Run() != nil {
				t.Skip("no typescript for node here")
			}
			if tc.lang == "python" && exec.Command("python3", "-c", "import ipykernel, zmq").Run() != nil {
				t.Skip("no ipykernel for python3 here")
			}
			resp, err := s.post("/v1/contexts", map[string]any{"language": tc.lang})
			if err != nil {
				t.Fatal(err)
			}
			var ctx struct{ ID string }
			_ = json.NewDecoder(resp.Body).Decode(&ctx)
			resp.Body.Close()
			if resp.StatusCode != 201 || ctx.ID == "" {
				t.Fatalf("context: %d", resp.StatusCode)
			}
			bad := func(evs []event) bool {
				for _, e := range evs {
					if e.Type == "kernel_restarted" || e.Name == "KernelDied" {
						return true
					}
				}
				return false
			}
			if evs := s.run(t, map[string]any{"code": tc.set, "context_id": ctx.ID}); evs[len(evs)-1].Status != "ok" {
				t.Fatalf("set: %+v", evs)
			}
			// Interrupts at random moments while the cells run.
			c, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c.Err() == nil {
					if resp, err := s.post("/v1/contexts/"+ctx.ID+"/interrupt", nil); err == nil {
						resp.Body.Close()
					}
					time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				}
			}()
			interrupted := 0
			for i := range cells {
				evs := s.run(t, map[string]any{"code": tc.cell, "context_id": ctx.ID})
				if bad(evs) {
					stop()
					wg.Wait()
					t.Fatalf("cell %d of %d: the context's process died: %+v", i+1, cells, evs)
				}
				if evs[len(evs)-1].Status == "interrupted" {
					interrupted++
				}
			}
			stop()
			wg.Wait()
			if interrupted == 0 {
				t.Errorf("no cell of %d was interrupted: the test did not test", cells)
			}
			evs := s.run(t, map[string]any{"code": tc.check, "context_id": ctx.ID})
			out := ""
			for _, e := range evs {
				if e.Type == "stdout" {
					out += e.Text
				}
				if e.Type == "result" {
					out, _ = e.Data["text/plain"].(string)
				}
			}
			if bad(evs) || out != tc.want {
				t.Errorf("after %d cells (%d interrupted): %+v", cells, interrupted, evs)
			}
			// ipykernel's word for a KeyboardInterrupt outside the cell's
			// code (sending the reply, say): the reply can be lost then,
			// and one landing as the request ends stops the kernel.
			if n := strings.Count(s.stderr.String(), "KeyboardInterrupt caught in kernel"); n > 0 {
				t.Errorf("%d interrupts landed in the kernel outside a cell's code", n)
			}
			t.Logf("%d cells, %d interrupted", cells, interrupted)
		})
	}
}

// TestStarvedCellIsNotReplaced: a cell whose process the host does not let
// run (a saturated host; here a CPU quota of 4 ms a second) is not taken
// for one that ignores SIGINT: past the grace period the server waits while
// the process is runnable and starved, the cell ends as interrupted, and the
// context keeps its state. The cell's own SIGINT trap (which ignores the
// SIGINTs sent again meanwhile) needs 25-30 ms of CPU on an idle host and
// 60 ms on one running the rest of the suite: more than the 12 ms it can
// have within the 3 s grace period, and under the 0.1 s past it after
// which a runnable process counts as ignoring SIGINT.
func TestStarvedCellIsNotReplaced(t *testing.T) {
	testenv.RequiresRoot(t)
	s := startServer(t)
	resp, err := s.post("/v1/contexts", map[string]any{"language": "bash"})
	if err != nil {
		t.Fatal(err)
	}
	var ctx struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&ctx)
	resp.Body.Close()
	out := func(evs []event) (text string) {
		for _, e := range evs {
			if e.Type == "stdout" {
				text += e.Text
			}
			if e.Type == "kernel_restarted" {
				t.Errorf("the shell was replaced: %+v", evs)
			}
		}
		return text
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out(s.run(t, map[string]any{"code": "KEPT=kept; echo $$", "context_id": ctx.ID}))))
	if err != nil {
		t.Fatal(err)
	}
	throttle(t, pid)

	done := make(chan []event, 1)
	start := time.Now()
	go func() {
		done <- s.run(t, map[string]any{"context_id": ctx.ID, "code": `trap 'trap "" INT; i=0; while [ $i -lt 8000 ]; do i=$((i+1)); done; trap "return 130 2>/dev/null" INT; return 130' INT; sleep 100`})
	}()
	time.Sleep(time.Second) // sleep has started, bash waits for it
	if resp, err := s.post("/v1/contexts/"+ctx.ID+"/interrupt", nil); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	evs := <-done
	took := time.Since(start) - time.Second
	out(evs)
	if st := evs[len(evs)-1].Status; st != "interrupted" {
		t.Errorf("the starved cell ended %q, want interrupted: %+v", st, evs)
	}
	// Past server.py's INTERRUPT_GRACE (3 s) and one INTERRUPT_RESEND
	// (0.5 s) the server has looked at the starved cell at least once.
	if took < 3500*time.Millisecond {
		t.Errorf("the starved cell stopped %v after its interrupt, too soon for its trap to have run starved: the test did not test", took)
	}
	if got := out(s.run(t, map[string]any{"code": "echo $KEPT", "context_id": ctx.ID})); got != "kept\n" {
		t.Errorf("after the starved cell: %q, want kept", got)
	}
	t.Logf("the starved cell ended %v after its interrupt", took)
}

// throttle moves pid into a cgroup of its own that lets it use 4 ms of
// CPU a second, removed when t ends (its processes moved back to
// the root first).
func throttle(t *testing.T, pid int) {
	t.Helper()
	name := fmt.Sprintf("platinum-test-starve-%d", os.Getpid())
	root, files := "/sys/fs/cgroup", map[string]string{"cpu.max": "4000 1000000"}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil { // v1
		root, files = "/sys/fs/cgroup/cpu", map[string]string{"cpu.cfs_period_us": "1000000", "cpu.cfs_quota_us": "4000"}
	}
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, p := range strings.Fields(string(procs)) {
			_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(p), 0)
		}
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove the test's cgroup: %v", err)
		}
	})
	for _, f := range []string{"cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.max"} {
		if v, ok := files[f]; ok {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatal(err)
	}
}
