package httpapi

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/platinum-dev/platinum/internal/agent"
	"github.com/platinum-dev/platinum/internal/controlplane"
)

// agentHost is a host whose sandboxes are in-process pt-agents, each on
// its own loopback address (127.x.y.z) at the agent port, so the control
// plane reaches them exactly as it reaches a real sandbox's agent.
type agentHost struct {
	*slowHost
	mu     sync.Mutex
	agents map[string]func() // sandbox id → stop
}

func (h *agentHost) Start(ctx context.Context, spec controlplane.StartSpec) (controlplane.Instance, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.agents[spec.ID]; ok {
		return controlplane.Instance{}, fmt.Errorf("sandbox %s already started", spec.ID)
	}
	cfg := agent.DefaultConfig()
	cfg.Token = spec.AgentToken
	u, err := user.Current()
	if err != nil {
		return controlplane.Instance{}, err
	}
	cfg.DefaultUser = u.Username
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := agent.New(cfg)
	if err != nil {
		return controlplane.Instance{}, err
	}
	var ln net.Listener
	var addr string
	for range 20 {
		b := make([]byte, 3)
		rand.Read(b)
		addr = fmt.Sprintf("127.%d.%d.%d", b[0], b[1], max(b[2], 2))
		if ln, err = net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(controlplane.AgentPort))); err == nil {
			break
		}
	}
	if err != nil {
		srv.Close()
		return controlplane.Instance{}, err
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	h.agents[spec.ID] = func() {
		srv.Close() // kills its processes
		hs.Close()
	}
	return controlplane.Instance{Address: addr}, nil
}

func (h *agentHost) Stop(ctx context.Context, id string, keep bool) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if stop, ok := h.agents[id]; ok {
		stop()
		delete(h.agents, id)
	}
	return false, nil
}

func (h *agentHost) Destroy(ctx context.Context, id string) error {
	_, err := h.Stop(ctx, id, false)
	return err
}

func (h *agentHost) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, stop := range h.agents {
		stop()
		delete(h.agents, id)
	}
}

// processServer serves the API over agentHost and returns it with one
// running sandbox's id.
func processServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	h := &agentHost{slowHost: &slowHost{release: make(chan struct{})}, agents: map[string]func(){}}
	close(h.release)
	srv := serveHost(t, h, nil)
	t.Cleanup(h.closeAll)
	resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes?wait_for_state=running", `{"template":"busybox"}`)
	if resp.StatusCode != 201 || m["state"] != "running" {
		t.Fatalf("create: %d %v", resp.StatusCode, m)
	}
	return srv, m["id"].(string)
}

// TestProcessRoutesValidate: bad input is a 400 naming its field, a
// process that cannot take the call is a 409, unknown pids and other
// orgs' sandboxes are 404, and a stopped sandbox is sandbox_not_ready.
func TestProcessRoutesValidate(t *testing.T) {
	srv, id := processServer(t)
	base := "/v1/sandboxes/" + id + "/processes"
	resp, m := call(t, srv, "tok", "POST", base, `{"cmd":["sleep","60"]}`)
	if resp.StatusCode != 201 {
		t.Fatalf("start: %d %v", resp.StatusCode, m)
	}
	pid := strconv.Itoa(int(m["pid"].(float64)))
	if m["pty"] != false || m["stdin"] != false || m["tag"] != nil || fmt.Sprint(m["cmd"]) != "[sleep 60]" || m["cwd"] == "" {
		t.Errorf("start answer %v, want a Process without pty, stdin or tag", m)
	}
	resp, m = call(t, srv, "tok", "POST", "/v1/orgs", `{"name":"proc-other"}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create org: %d %v", resp.StatusCode, m)
	}
	other := m["token"].(string)

	tests := []struct {
		name, tok, method, path, body string
		status                        int
		code, field                   string
	}{
		{"bad signal", "tok", "POST", base + "/" + pid + "/signal", `{"signal":"SIGBOGUS"}`, 400, "invalid_request", "signal"},
		{"missing signal", "tok", "POST", base + "/" + pid + "/signal", `{}`, 400, "invalid_request", "signal"},
		{"start pty cols 0", "tok", "POST", base, `{"cmd":"sh","pty":{"cols":0,"rows":24}}`, 400, "invalid_request", "pty.cols"},
		{"start pty rows missing", "tok", "POST", base, `{"cmd":"sh","pty":{"cols":80}}`, 400, "invalid_request", "pty.rows"},
		{"resize rows too big", "tok", "POST", base + "/" + pid + "/resize", `{"cols":80,"rows":20000}`, 400, "invalid_request", "rows"},
		{"resize negative cols", "tok", "POST", base + "/" + pid + "/resize", `{"cols":-1,"rows":24}`, 400, "invalid_request", "cols"},
		{"empty cmd", "tok", "POST", base, `{"cmd":[]}`, 400, "invalid_request", "cmd"},
		{"bad timeout", "tok", "POST", base, `{"cmd":"true","timeout_ms":0}`, 400, "invalid_request", "timeout_ms"},
		{"unknown field", "tok", "POST", base, `{"cmd":"true","bogus":1}`, 400, "invalid_request", "bogus"},
		{"missing binary", "tok", "POST", base, `{"cmd":["no-such-binary-xyz"]}`, 400, "invalid_request", ""},
		{"missing binary streamed", "tok", "POST", base + "?stream=true", `{"cmd":["no-such-binary-xyz"]}`, 400, "invalid_request", ""},
		{"cwd not a directory", "tok", "POST", base, `{"cmd":"true","cwd":"/no/such/dir"}`, 400, "invalid_request", ""},
		{"tag too long", "tok", "POST", base, `{"cmd":"true","tag":"` + strings.Repeat("t", 257) + `"}`, 400, "invalid_request", "tag"},
		{"input data and data_b64", "tok", "POST", base + "/" + pid + "/input", `{"data":"a","data_b64":"YQ=="}`, 400, "invalid_request", "data_b64"},
		{"input bad base64", "tok", "POST", base + "/" + pid + "/input", `{"data_b64":"!!"}`, 400, "invalid_request", "data_b64"},
		{"input nothing", "tok", "POST", base + "/" + pid + "/input", `{}`, 400, "invalid_request", "data"},
		{"bad pid", "tok", "POST", base + "/abc/signal", `{"signal":"SIGTERM"}`, 400, "invalid_request", "pid"},
		{"input without stdin", "tok", "POST", base + "/" + pid + "/input", `{"data":"x"}`, 409, "conflict", ""},
		{"eof without stdin", "tok", "POST", base + "/" + pid + "/input", `{"eof":true}`, 409, "conflict", ""},
		{"resize non-pty", "tok", "POST", base + "/" + pid + "/resize", `{"cols":100,"rows":30}`, 409, "conflict", ""},
		{"unknown pid signal", "tok", "POST", base + "/999999/signal", `{"signal":"SIGTERM"}`, 404, "not_found", ""},
		{"unknown pid input", "tok", "POST", base + "/999999/input", `{"data":"x"}`, 404, "not_found", ""},
		{"unknown pid kill", "tok", "DELETE", base + "/999999", ``, 404, "not_found", ""},
		{"unknown pid stream", "tok", "GET", base + "/999999/stream", ``, 404, "not_found", ""},
		{"other org start", other, "POST", base, `{"cmd":"true"}`, 404, "not_found", ""},
		{"other org list", other, "GET", base, ``, 404, "not_found", ""},
		{"other org signal", other, "POST", base + "/" + pid + "/signal", `{"signal":"SIGKILL"}`, 404, "not_found", ""},
		{"other org stream", other, "GET", base + "/" + pid + "/stream", ``, 404, "not_found", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, m := call(t, srv, tc.tok, tc.method, tc.path, tc.body)
			if resp.StatusCode != tc.status || m["code"] != tc.code {
				t.Fatalf("%d %v, want %d %s", resp.StatusCode, m, tc.status, tc.code)
			}
			if tc.field != "" && m["field"] != tc.field {
				t.Fatalf("field %v, want %s (%v)", m["field"], tc.field, m)
			}
		})
	}
	// None of the rejected calls touched the process.
	resp, m = call(t, srv, "tok", "GET", base, "")
	if list, _ := m["processes"].([]any); resp.StatusCode != 200 || len(list) != 1 {
		t.Fatalf("list: %d %v, want the one sleep", resp.StatusCode, m)
	}
	if resp, m := call(t, srv, "tok", "DELETE", base+"/"+pid, ""); resp.StatusCode != 204 {
		t.Fatalf("kill: %d %v", resp.StatusCode, m)
	}

	if resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", ""); resp.StatusCode != 200 {
		t.Fatalf("stop: %d %v", resp.StatusCode, m)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", base, `{"cmd":"true"}`},
		{"GET", base, ""},
		{"POST", base + "/" + pid + "/signal", `{"signal":"SIGTERM"}`},
		{"GET", base + "/" + pid + "/stream", ""},
	} {
		if resp, m := call(t, srv, "tok", c.method, c.path, c.body); resp.StatusCode != 409 || m["code"] != "sandbox_not_ready" {
			t.Errorf("%s %s on a stopped sandbox: %d %v, want 409 sandbox_not_ready", c.method, c.path, resp.StatusCode, m)
		}
	}
}

// TestProcessStreamEvents: a streamed start answers start, output and exit
// as NDJSON ExecEvents; a PTY's output comes as pty events in base64.
func TestProcessStreamEvents(t *testing.T) {
	srv, id := processServer(t)
	base := "/v1/sandboxes/" + id + "/processes"
	tests := []struct {
		name, body string
		want       []string // event types after start
		exit       float64
	}{
		{"pipes", `{"cmd":"echo out; echo err >&2; exit 3"}`, []string{"stdout", "stderr", "exit"}, 3},
		{"pty", `{"cmd":"echo hi","pty":{"cols":80,"rows":24}}`, []string{"pty", "exit"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			events := streamCall(t, srv, "POST", base+"?stream=true", tc.body)
			if len(events) == 0 || events[0]["type"] != "start" || events[0]["pid"] == nil {
				t.Fatalf("events %v, want start first", events)
			}
			var types []string
			seen := map[string]bool{}
			for _, ev := range events[1:] {
				typ := ev["type"].(string)
				if !seen[typ] {
					types = append(types, typ)
					seen[typ] = true
				}
			}
			sortedWant := strings.Join(tc.want, ",")
			if tc.name == "pipes" { // stdout and stderr are separate pipes: either may come first
				seenAll := seen["stdout"] && seen["stderr"] && types[len(types)-1] == "exit"
				if !seenAll {
					t.Fatalf("event types %v, want %s", types, sortedWant)
				}
			} else if strings.Join(types, ",") != sortedWant {
				t.Fatalf("event types %v, want %s", types, sortedWant)
			}
			last := events[len(events)-1]
			if last["exit_code"] != tc.exit || last["timed_out"] != false {
				t.Fatalf("exit %v, want exit_code %v", last, tc.exit)
			}
			if tc.name == "pty" {
				if _, ok := events[1]["data_b64"].(string); !ok {
					t.Fatalf("pty event %v lacks data_b64", events[1])
				}
			}
		})
	}
}

// streamCall reads an NDJSON answer to its end.
func streamCall(t *testing.T, srv *httptest.Server, method, path, body string) []map[string]any {
	t.Helper()
	resp := send(t, srv, "tok", method, path, body)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %s %s", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	out, _ := readNDJSON(t, resp.Body)
	return out
}

// readNDJSON decodes an NDJSON answer to its end, a map a line. A line
// that is not JSON fails the test; the error is the read's (a cut stream).
func readNDJSON(t *testing.T, r io.Reader) ([]map[string]any, error) {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out, sc.Err()
}
