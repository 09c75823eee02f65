package agent_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/platinum-dev/platinum/internal/agent"
)

// fakeCodeServer stands in for the code-interpreter server (codeinterp's
// server.py, which needs jupyter): it answers /v1/execute with the events
// a cell's code names, records the requests, and keeps contexts. The real
// server is driven through the SDK in tests/compat/daytona.
type fakeCodeServer struct {
	mu       sync.Mutex
	cells    []map[string]any
	contexts []map[string]any
}

func (f *fakeCodeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/execute":
		var cell map[string]any
		json.NewDecoder(r.Body).Decode(&cell)
		f.mu.Lock()
		f.cells = append(f.cells, cell)
		f.mu.Unlock()
		if cell["context_id"] == "ctx_gone" {
			writeCodeError(w, 404, "not_found", "context ctx_gone not found")
			return
		}
		lang, _ := cell["language"].(string)
		ctxID := stringOr(cell, "context_id", "ctx_default_"+lang)
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		status := "ok"
		for _, line := range strings.Split(cell["code"].(string), "\n") {
			verb, arg, _ := strings.Cut(line, " ")
			switch verb {
			case "out":
				enc.Encode(map[string]any{"type": "stdout", "text": arg + "\n"})
			case "err":
				enc.Encode(map[string]any{"type": "stderr", "text": arg + "\n"})
			case "result":
				enc.Encode(map[string]any{"type": "result", "is_main_result": true, "data": map[string]any{"text/plain": arg}})
			case "png":
				enc.Encode(map[string]any{"type": "result", "data": map[string]any{"image/png": arg, "text/plain": "<Figure>"}})
			case "raise":
				name, value, _ := strings.Cut(arg, ":")
				enc.Encode(map[string]any{"type": "error", "name": name, "value": value, "traceback": "Traceback:\n" + name + ": " + value})
				status = "error"
			case "restarted":
				enc.Encode(map[string]any{"type": "kernel_restarted", "reason": arg})
			case "status":
				status = arg
			}
		}
		enc.Encode(map[string]any{"type": "end", "context_id": ctxID, "status": status})
	case r.Method == "GET" && r.URL.Path == "/v1/contexts":
		f.mu.Lock()
		all := append([]map[string]any{{"id": "ctx_default_python", "language": "python", "cwd": "/root", "default": true}}, f.contexts...)
		f.mu.Unlock()
		json.NewEncoder(w).Encode(all)
	case r.Method == "POST" && r.URL.Path == "/v1/contexts":
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		if b["language"] == "cobol" {
			writeCodeError(w, 400, "invalid_request", "unknown language 'cobol'")
			return
		}
		c := map[string]any{"id": "ctx_made", "language": b["language"], "cwd": stringOr(b, "cwd", "/root"), "default": false}
		f.mu.Lock()
		f.contexts = append(f.contexts, c)
		f.mu.Unlock()
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(c)
	case r.Method == "DELETE" && strings.HasPrefix(r.URL.Path, "/v1/contexts/"):
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, c := range f.contexts {
			if c["id"] == strings.TrimPrefix(r.URL.Path, "/v1/contexts/") {
				f.contexts = append(f.contexts[:i], f.contexts[i+1:]...)
				w.WriteHeader(204)
				return
			}
		}
		writeCodeError(w, 404, "not_found", "no such context")
	default:
		http.NotFound(w, r)
	}
}

// writeCodeError answers as server.py does when it refuses a request.
func writeCodeError(w http.ResponseWriter, status int, code, msg string) {
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"code": code, "error": msg})
}

// stringOr is m[key] if it is a non-empty string, else def: a request
// field server.py defaults.
func stringOr(m map[string]any, key, def string) string {
	if v, _ := m[key].(string); v != "" {
		return v
	}
	return def
}

func (f *fakeCodeServer) lastCell() map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cells[len(f.cells)-1]
}

type codeRunAnswer struct {
	ExitCode    int
	Result      string
	Interpreter string
	Artifacts   struct {
		Charts []struct{ Type, PNG string }
	}
	Code string
}

// TestToolboxCodeRunOnKernels: where the template has the code
// interpreter, codeRun runs in the language's default context (state
// kept) and says so; output comes in order, an error is exit 1 with its
// traceback, SystemExit keeps its code, PNG figures are charts, a timeout
// is 408 PROCESS_EXECUTION_TIMEOUT, and argv (which a kernel cannot take)
// falls back to a fresh process.
func TestToolboxCodeRunOnKernels(t *testing.T) {
	fake := &fakeCodeServer{}
	cs := httptest.NewServer(fake)
	t.Cleanup(cs.Close)
	e := newEnvWith(t, func(c *agent.Config) { c.CodeInterpreter = cs.URL })

	var a codeRunAnswer
	if st := e.tb(t, "POST", "/process/code-run", map[string]any{"code": "out one\nerr two\nresult 3\npng iVBOR", "language": "python", "envs": map[string]string{"K": "v"}, "timeout": 5}, &a); st != 200 {
		t.Fatalf("code-run: %d %+v", st, a)
	}
	if a.ExitCode != 0 || a.Result != "one\ntwo\n" || !strings.Contains(a.Interpreter, "ctx_default_python") || !strings.Contains(a.Interpreter, "state is kept") {
		t.Errorf("code-run: %+v", a)
	}
	if len(a.Artifacts.Charts) != 1 || a.Artifacts.Charts[0].PNG != "iVBOR" || a.Artifacts.Charts[0].Type != "unknown" {
		t.Errorf("charts: %+v", a.Artifacts.Charts)
	}
	cell := fake.lastCell()
	if cell["language"] != "python" || cell["timeout_ms"] != float64(5000) || cell["env"].(map[string]any)["K"] != "v" {
		t.Errorf("cell sent: %v", cell)
	}
	e.tb(t, "POST", "/process/code-run", map[string]any{"code": "out before\nraise ZeroDivisionError:division by zero", "language": "typescript"}, &a)
	if a.ExitCode != 1 || a.Result != "before\nTraceback:\nZeroDivisionError: division by zero\n" || fake.lastCell()["language"] != "typescript" {
		t.Errorf("an error: %+v (cell %v)", a, fake.lastCell())
	}
	e.tb(t, "POST", "/process/code-run", map[string]any{"code": "raise SystemExit:4", "language": "python"}, &a)
	if a.ExitCode != 4 {
		t.Errorf("SystemExit(4): %+v", a)
	}
	e.tb(t, "POST", "/process/code-run", map[string]any{"code": "restarted the kernel died\nout x", "language": "python"}, &a)
	if a.Result != "[platinum] the kernel died\nx\n" {
		t.Errorf("a restarted kernel: %q", a.Result)
	}
	if st := e.tb(t, "POST", "/process/code-run", map[string]any{"code": "status timeout", "language": "python", "timeout": 1}, &a); st != 408 || a.Code != "PROCESS_EXECUTION_TIMEOUT" {
		t.Errorf("a timeout: %d %+v", st, a)
	}
	if st := e.tb(t, "POST", "/process/code-run", map[string]any{"code": "x", "language": "cobol"}, &a); st != 400 {
		t.Errorf("unknown language: %d", st)
	}
	if _, err := exec.LookPath("python3"); err == nil {
		n := len(fake.cells)
		e.tb(t, "POST", "/process/code-run", map[string]any{"code": "import sys; print(sys.argv[1:])", "language": "python", "argv": []string{"a"}}, &a)
		if a.Result != "['a']\n" || !strings.Contains(a.Interpreter, "fresh python3 process") || len(fake.cells) != n {
			t.Errorf("argv on a fresh process: %+v", a)
		}
	}
}

// TestToolboxInterpreter: the stateful interpreter's contexts (the
// defaults left out of the list, as the daemon does) and its WebSocket:
// stdout, stderr and error frames, then control completed; interrupted;
// a timeout closes with 4008; an unknown context is a policy close.
func TestToolboxInterpreter(t *testing.T) {
	fake := &fakeCodeServer{}
	cs := httptest.NewServer(fake)
	t.Cleanup(cs.Close)
	e := newEnvWith(t, func(c *agent.Config) { c.CodeInterpreter = cs.URL })

	var ctxv struct{ ID, Language, Cwd, CreatedAt string }
	if st := e.tb(t, "POST", "/process/interpreter/context", map[string]any{"cwd": "/tmp"}, &ctxv); st != 200 || ctxv.ID != "ctx_made" || ctxv.Language != "python" || ctxv.Cwd != "/tmp" || ctxv.CreatedAt == "" {
		t.Fatalf("create context: %d %+v", st, ctxv)
	}
	var list struct{ Contexts []struct{ ID string } }
	e.tb(t, "GET", "/process/interpreter/context", nil, &list)
	if len(list.Contexts) != 1 || list.Contexts[0].ID != "ctx_made" {
		t.Errorf("list: %+v", list)
	}
	var errBody struct{ Code string }
	if st := e.tb(t, "POST", "/process/interpreter/context", map[string]any{"language": "cobol"}, &errBody); st != 400 || errBody.Code != "BAD_REQUEST" {
		t.Errorf("unknown language: %d %+v", st, errBody)
	}

	type frame struct{ Type, Text, Name, Value, Traceback string }
	run := func(msg map[string]any) ([]frame, websocket.StatusCode) {
		t.Helper()
		ws := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/toolbox/process/interpreter/execute"
		conn, _, err := websocket.Dial(testCtx(t), ws, &websocket.DialOptions{HTTPHeader: http.Header{"X-Access-Token": {testToken}}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		b, _ := json.Marshal(msg)
		if err := conn.Write(testCtx(t), websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		var frames []frame
		for {
			_, data, err := conn.Read(testCtx(t))
			if err != nil {
				var ce websocket.CloseError
				if errors.As(err, &ce) {
					return frames, ce.Code
				}
				t.Fatalf("read: %v", err)
			}
			var f frame
			json.Unmarshal(data, &f)
			frames = append(frames, f)
		}
	}
	frames, code := run(map[string]any{"code": "out hi\nerr warn\nresult 42\nraise NameError:x", "contextId": "ctx_made", "envs": map[string]string{"E": "1"}, "timeout": 3})
	want := []frame{{Type: "stdout", Text: "hi\n"}, {Type: "stderr", Text: "warn\n"},
		{Type: "error", Name: "NameError", Value: "x", Traceback: "Traceback:\nNameError: x"}, {Type: "control", Text: "completed"}}
	if code != websocket.StatusNormalClosure || len(frames) != len(want) {
		t.Fatalf("execute: %d %+v", code, frames)
	}
	for i := range want {
		if frames[i] != want[i] {
			t.Errorf("frame %d: %+v, want %+v", i, frames[i], want[i])
		}
	}
	if c := fake.lastCell(); c["context_id"] != "ctx_made" || c["timeout_ms"] != float64(3000) || c["env"].(map[string]any)["E"] != "1" {
		t.Errorf("cell sent: %v", c)
	}
	run(map[string]any{"code": "out x"})
	if c := fake.lastCell(); c["context_id"] != nil || c["language"] != "python" || c["timeout_ms"] != float64(600000) {
		t.Errorf("default context cell: %v", c)
	}
	if frames, code := run(map[string]any{"code": "status interrupted"}); code != websocket.StatusNormalClosure || len(frames) != 1 || frames[0].Text != "interrupted" {
		t.Errorf("interrupted: %d %+v", code, frames)
	}
	if _, code := run(map[string]any{"code": "status timeout", "timeout": 1}); code != 4008 {
		t.Errorf("timeout: close %d, want 4008", code)
	}
	if _, code := run(map[string]any{"code": "out x", "contextId": "ctx_gone"}); code != websocket.StatusPolicyViolation {
		t.Errorf("unknown context: close %d", code)
	}
	if _, code := run(map[string]any{"code": " "}); code != websocket.StatusPolicyViolation {
		t.Errorf("empty code: close %d", code)
	}

	if st := e.tb(t, "DELETE", "/process/interpreter/context/default", nil, &errBody); st != 400 {
		t.Errorf("delete default: %d", st)
	}
	if st := e.tb(t, "DELETE", "/process/interpreter/context/ctx_made", nil, nil); st != 200 {
		t.Errorf("delete: %d", st)
	}
	if st := e.tb(t, "DELETE", "/process/interpreter/context/ctx_made", nil, &errBody); st != 404 {
		t.Errorf("delete again: %d", st)
	}
}

// TestToolboxCodeFresh: without the code interpreter, codeRun starts a
// fresh process per call and says so; TypeScript has its types stripped
// (a syntax error reads like node's, with line and column); the
// interpreter routes refuse clearly.
func TestToolboxCodeFresh(t *testing.T) {
	for _, bin := range []string{"node", "python3"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required in CI", bin)
			}
			t.Skipf("%s not installed", bin)
		}
	}
	e := newEnv(t)
	var a codeRunAnswer
	e.tb(t, "POST", "/process/code-run", map[string]any{"code": "x = 41\nprint(x + 1)", "language": "python"}, &a)
	if a.ExitCode != 0 || a.Result != "42\n" || !strings.Contains(a.Interpreter, "fresh python3 process per call") {
		t.Errorf("python: %+v", a)
	}
	e.tb(t, "POST", "/process/code-run", map[string]any{"code": "print(x)", "language": "python"}, &a)
	if a.ExitCode != 1 || !strings.Contains(a.Result, "NameError") {
		t.Errorf("state must not carry over on fresh processes: %+v", a)
	}
	ts := "interface P { n: number }\nconst p: P = { n: 6 * 7 };\nfunction id<T>(v: T): T { return v }\nenum E { A = 1 }\nconsole.log(id<number>(p.n), E.A, process.argv.slice(1).join(','))"
	e.tb(t, "POST", "/process/code-run", map[string]any{"code": ts, "language": "typescript", "argv": []string{"x", "y"}}, &a)
	if a.ExitCode != 0 || a.Result != "42 1 x,y\n" || !strings.Contains(a.Interpreter, "fresh node process") {
		t.Errorf("typescript: %+v", a)
	}
	e.tb(t, "POST", "/process/code-run", map[string]any{"code": "const a: number = ;", "language": "typescript"}, &a)
	if a.ExitCode != 1 || !strings.Contains(a.Result, "code.ts:1:19: SyntaxError") {
		t.Errorf("typescript syntax error: %+v", a)
	}
	var errBody struct{ Code, Message string }
	if st := e.tb(t, "POST", "/process/interpreter/context", map[string]any{}, &errBody); st != 400 || !strings.Contains(errBody.Message, "no code interpreter") {
		t.Errorf("context without a code interpreter: %d %+v", st, errBody)
	}
	ws := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/toolbox/process/interpreter/execute"
	conn, _, err := websocket.Dial(testCtx(t), ws, &websocket.DialOptions{HTTPHeader: http.Header{"X-Access-Token": {testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	_, _, err = conn.Read(testCtx(t))
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "no code interpreter") {
		t.Errorf("execute without a code interpreter: %v", err)
	}
}
