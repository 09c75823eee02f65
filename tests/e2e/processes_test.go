package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// procEvent is one ExecEvent line of a process stream.
type procEvent struct {
	Type     string `json:"type"`
	PID      int    `json:"pid"`
	Data     string `json:"data"`
	DataB64  string `json:"data_b64"`
	ExitCode *int   `json:"exit_code"`
	TimedOut bool   `json:"timed_out"`
	Code     string `json:"code"`
	Error    string `json:"error"`
}

// procStream is an open NDJSON answer of the processes API.
type procStream struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
	// out accumulates stdout, stderr and decoded pty output.
	out strings.Builder
}

// openProcStream sends method path (body JSON-encoded when not nil, header
// as name/value pairs) and expects an NDJSON answer; ctx bounds the whole
// stream.
func openProcStream(ctx context.Context, t *testing.T, method, path string, body any, header ...string) *procStream {
	t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, _ := http.NewRequestWithContext(ctx, method, env.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+env.token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		t.Fatalf("%s %s: %d %s %v", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), m)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	return &procStream{t: t, resp: resp, sc: sc}
}

// next reads one event (false at the end of the stream), adding output to s.out.
func (s *procStream) next() (procEvent, bool) {
	s.t.Helper()
	if !s.sc.Scan() {
		return procEvent{}, false
	}
	var ev procEvent
	if err := json.Unmarshal(s.sc.Bytes(), &ev); err != nil {
		s.t.Fatalf("line %q: %v", s.sc.Text(), err)
	}
	switch ev.Type {
	case "stdout", "stderr":
		s.out.WriteString(ev.Data)
	case "pty":
		b, err := base64.StdEncoding.DecodeString(ev.DataB64)
		if err != nil {
			s.t.Fatalf("pty event %q: %v", s.sc.Text(), err)
		}
		s.out.Write(b)
	case "error":
		s.t.Fatalf("error event: %s %s", ev.Code, ev.Error)
	}
	return ev, true
}

// start reads the first event, which must be start, and returns its pid.
func (s *procStream) start() int {
	s.t.Helper()
	ev, ok := s.next()
	if !ok || ev.Type != "start" || ev.PID <= 0 {
		s.t.Fatalf("first event %+v (%v), want start with a pid", ev, s.sc.Err())
	}
	return ev.PID
}

// until reads until the output holds want; the stream must not end first.
func (s *procStream) until(want string) {
	s.t.Helper()
	for !strings.Contains(s.out.String(), want) {
		ev, ok := s.next()
		if !ok || ev.Type == "exit" {
			s.t.Fatalf("stream ended (%+v, %v) before output %q; got %q", ev, s.sc.Err(), want, s.out.String())
		}
	}
}

// exit reads to the end and returns the one exit event.
func (s *procStream) exit() procEvent {
	s.t.Helper()
	var exits []procEvent
	for {
		ev, ok := s.next()
		if !ok {
			break
		}
		if ev.Type == "exit" {
			exits = append(exits, ev)
		}
	}
	if len(exits) != 1 || exits[0].ExitCode == nil {
		s.t.Fatalf("exit events %+v (stream err %v), want exactly one with exit_code", exits, s.sc.Err())
	}
	return exits[0]
}

func (s *procStream) close() { s.resp.Body.Close() }

// listPIDs returns the pids of GET .../processes with their tags.
func listPIDs(t *testing.T, c *client, id string) map[int]any {
	t.Helper()
	r := c.do("GET", "/v1/sandboxes/"+id+"/processes", nil)
	if r.Status != 200 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	var body struct {
		Processes []struct {
			PID   int      `json:"pid"`
			Tag   any      `json:"tag"`
			Cmd   []string `json:"cmd"`
			PTY   bool     `json:"pty"`
			Stdin bool     `json:"stdin"`
		} `json:"processes"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	out := map[int]any{}
	for _, p := range body.Processes {
		out[p.PID] = p.Tag
	}
	return out
}

// startBackground starts a process without a stream and returns its pid.
func startBackground(t *testing.T, c *client, id string, body map[string]any) int {
	t.Helper()
	r := c.do("POST", "/v1/sandboxes/"+id+"/processes", body)
	if r.Status != 201 {
		t.Fatalf("start %v: %d %s", body, r.Status, r.Body)
	}
	pid, _ := r.JSON()["pid"].(float64)
	if pid <= 0 {
		t.Fatalf("start answer %s has no pid", r.Body)
	}
	return int(pid)
}

func procPost(t *testing.T, c *client, id string, pid int, op string, body any) {
	t.Helper()
	r := c.do("POST", fmt.Sprintf("/v1/sandboxes/%s/processes/%d/%s", id, pid, op), body)
	if r.Status != 204 {
		t.Fatalf("%s %d %v: %d %s", op, pid, body, r.Status, r.Body)
	}
}

// TestProcesses drives the processes API against real sandboxes of both
// runtimes: streamed and background starts, attach, stdin, signals, PTYs,
// timeouts, and the sandbox env as it is when a process starts.
func TestProcesses(t *testing.T) {
	c := newClient(t)
	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			id := c.create(map[string]any{"template": "busybox", "runtime": rt})
			base := "/v1/sandboxes/" + id + "/processes"
			// Each stream is bounded so a server that buffers cannot hang
			// the test; nothing below waits on time otherwise.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()

			t.Run("streamed start delivers output as it happens", func(t *testing.T) {
				// b cannot be printed until the test has read a and
				// created the gate file.
				s := openProcStream(ctx, t, "POST", base+"?stream=true", map[string]any{
					"cmd": "echo a; while [ ! -e /tmp/gate-b ]; do sleep 0.05; done; echo b"})
				s.start()
				s.until("a\n")
				if strings.Contains(s.out.String(), "b") {
					t.Fatalf("output %q has b before the gate opened", s.out.String())
				}
				c.mustSh(id, "touch /tmp/gate-b")
				if ev := s.exit(); *ev.ExitCode != 0 || ev.TimedOut || s.out.String() != "a\nb\n" {
					t.Fatalf("exit %+v output %q, want exit 0 after a then b", ev, s.out.String())
				}
				// Accept: application/x-ndjson streams too; a arrives, then b.
				s = openProcStream(ctx, t, "POST", base, map[string]any{"cmd": []string{"sh", "-c", "echo a; sleep 1; echo b"}}, "Accept", "application/x-ndjson")
				s.start()
				if ev, ok := s.next(); !ok || ev.Type != "stdout" || ev.Data != "a\n" {
					t.Fatalf("first output %+v, want stdout a alone", ev)
				}
				if ev := s.exit(); *ev.ExitCode != 0 || s.out.String() != "a\nb\n" {
					t.Fatalf("exit %+v output %q", ev, s.out.String())
				}
			})

			t.Run("background start, list, connect", func(t *testing.T) {
				pid := startBackground(t, c, id, map[string]any{
					"cmd": "i=0; while true; do i=$((i+1)); echo tick$i; sleep 0.1; done", "tag": "ticker"})
				if tag := listPIDs(t, c, id)[pid]; tag != "ticker" {
					t.Fatalf("list: pid %d tag %v, want ticker", pid, tag)
				}
				s := openProcStream(ctx, t, "GET", fmt.Sprintf("%s/%d/stream", base, pid), nil)
				if got := s.start(); got != pid {
					t.Fatalf("connect start pid %d, want %d", got, pid)
				}
				s.until("tick")
				if r := c.do("DELETE", fmt.Sprintf("%s/%d", base, pid), nil); r.Status != 204 {
					t.Fatalf("kill: %d %s", r.Status, r.Body)
				}
				if ev := s.exit(); *ev.ExitCode != -1 {
					t.Fatalf("exit after kill %+v, want exit_code -1", ev)
				}
				if _, ok := listPIDs(t, c, id)[pid]; ok {
					t.Fatalf("killed pid %d still listed", pid)
				}
			})

			t.Run("stdin to cat, eof ends it", func(t *testing.T) {
				pid := startBackground(t, c, id, map[string]any{"cmd": []string{"cat"}, "stdin": true})
				s := openProcStream(ctx, t, "GET", fmt.Sprintf("%s/%d/stream", base, pid), nil)
				s.start()
				procPost(t, c, id, pid, "input", map[string]any{"data": "hello\n"})
				s.until("hello\n")
				procPost(t, c, id, pid, "input", map[string]any{"data_b64": base64.StdEncoding.EncodeToString([]byte("bytes\x01\n")), "eof": true})
				if ev := s.exit(); *ev.ExitCode != 0 || s.out.String() != "hello\nbytes\x01\n" {
					t.Fatalf("exit %+v output %q, want exit 0 after echoing both inputs", ev, s.out.String())
				}
			})

			t.Run("SIGTERM ends with exit_code -1", func(t *testing.T) {
				pid := startBackground(t, c, id, map[string]any{"cmd": []string{"sleep", "100"}})
				s := openProcStream(ctx, t, "GET", fmt.Sprintf("%s/%d/stream", base, pid), nil)
				s.start()
				procPost(t, c, id, pid, "signal", map[string]any{"signal": "SIGTERM"})
				if ev := s.exit(); *ev.ExitCode != -1 || ev.TimedOut {
					t.Fatalf("exit %+v, want exit_code -1, not timed out", ev)
				}
			})

			t.Run("pty answers stty size and follows resize", func(t *testing.T) {
				s := openProcStream(ctx, t, "POST", base+"?stream=true", map[string]any{"cmd": []string{"sh"}, "pty": map[string]any{"cols": 80, "rows": 24}})
				pid := s.start()
				procPost(t, c, id, pid, "input", map[string]any{"data": "stty size\n"})
				s.until("24 80")
				procPost(t, c, id, pid, "resize", map[string]any{"cols": 100, "rows": 30})
				procPost(t, c, id, pid, "input", map[string]any{"data": "stty size\n"})
				s.until("30 100")
				procPost(t, c, id, pid, "input", map[string]any{"data": "exit 7\n"})
				if ev := s.exit(); *ev.ExitCode != 7 {
					t.Fatalf("exit %+v, want 7", ev)
				}
			})

			t.Run("closing a start stream leaves the process running", func(t *testing.T) {
				s := openProcStream(ctx, t, "POST", base+"?stream=true", map[string]any{
					"cmd": "echo started; while [ ! -e /tmp/gate-close ]; do sleep 0.05; done; echo survived; sleep 100"})
				pid := s.start()
				s.until("started")
				s.close()
				if _, ok := listPIDs(t, c, id)[pid]; !ok {
					t.Fatalf("pid %d not listed after its start stream closed", pid)
				}
				// It still runs its script after the close: open the gate and
				// watch it get past.
				conn := openProcStream(ctx, t, "GET", fmt.Sprintf("%s/%d/stream", base, pid), nil)
				conn.start()
				c.mustSh(id, "touch /tmp/gate-close")
				conn.until("survived")
				conn.close()
				if _, ok := listPIDs(t, c, id)[pid]; !ok {
					t.Fatalf("pid %d gone after a connect stream closed", pid)
				}
				if r := c.do("DELETE", fmt.Sprintf("%s/%d", base, pid), nil); r.Status != 204 {
					t.Fatalf("kill: %d %s", r.Status, r.Body)
				}
			})

			t.Run("timeout_ms kills a detached process", func(t *testing.T) {
				s := openProcStream(ctx, t, "POST", base+"?stream=true", map[string]any{"cmd": []string{"sleep", "100"}, "timeout_ms": 500})
				s.start()
				if ev := s.exit(); !ev.TimedOut || *ev.ExitCode != -1 {
					t.Fatalf("exit %+v, want timed_out with exit_code -1", ev)
				}
				pid := startBackground(t, c, id, map[string]any{"cmd": []string{"sleep", "100"}, "timeout_ms": 500})
				// Nobody is attached; the agent kills it at the deadline. Its
				// end stays attachable for a while, so connecting now either
				// waits for it or replays it.
				conn := openProcStream(ctx, t, "GET", fmt.Sprintf("%s/%d/stream", base, pid), nil)
				conn.start()
				if ev := conn.exit(); !ev.TimedOut {
					t.Fatalf("detached process's exit %+v, want timed_out", ev)
				}
			})

			t.Run("env patch applies to later processes", func(t *testing.T) {
				val := "v-" + randHex(6)
				if r := c.do("PATCH", "/v1/sandboxes/"+id+"/env", map[string]any{"env": map[string]string{"PROC_VAR": val}}); r.Status != 200 {
					t.Fatalf("patch env: %d %s", r.Status, r.Body)
				}
				s := openProcStream(ctx, t, "POST", base+"?stream=true", map[string]any{"cmd": `echo "var=$PROC_VAR own=$OWN"`, "env": map[string]string{"OWN": "x"}})
				s.start()
				if ev := s.exit(); *ev.ExitCode != 0 || s.out.String() != "var="+val+" own=x\n" {
					t.Fatalf("exit %+v output %q, want the patched value", ev, s.out.String())
				}
			})
		})
	}
}

// TestCLIProcesses: pt sandbox ps lists what the API started, and pt
// sandbox kill-process signals it.
func TestCLIProcesses(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	pid := startBackground(t, c, id, map[string]any{"cmd": []string{"sleep", "100"}, "tag": "cli-sleeper"})
	out, errOut, code := pt(t, nil, "sandbox", "ps", id)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d", pid)) || !strings.Contains(out, "cli-sleeper") || !strings.Contains(out, "sleep 100") {
		t.Fatalf("ps: %d %q %q", code, out, errOut)
	}
	out, _, code = pt(t, nil, "sandbox", "ps", id, "--json")
	var listed struct {
		Processes []struct {
			PID int    `json:"pid"`
			Tag string `json:"tag"`
		} `json:"processes"`
	}
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed.Processes) == 0 {
		t.Fatalf("ps --json: %d %q %v", code, out, err)
	}
	if _, errOut, code := pt(t, nil, "sandbox", "kill-process", id, fmt.Sprint(pid), "--signal", "bogus"); code != 1 || !strings.Contains(errOut, "signal") {
		t.Errorf("bad signal: %d %q, want exit 1 naming the signal", code, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := openProcStream(ctx, t, "GET", fmt.Sprintf("/v1/sandboxes/%s/processes/%d/stream", id, pid), nil)
	s.start()
	if _, errOut, code := pt(t, nil, "sandbox", "kill-process", id, fmt.Sprint(pid), "--signal", "int"); code != 0 {
		t.Fatalf("kill-process: %d %q", code, errOut)
	}
	if ev := s.exit(); *ev.ExitCode != -1 {
		t.Fatalf("exit after SIGINT %+v, want -1", ev)
	}
	if _, errOut, code := pt(t, nil, "sandbox", "kill-process", id, fmt.Sprint(pid)); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("kill-process of an ended pid: %d %q, want exit 1, not found", code, errOut)
	}
}
