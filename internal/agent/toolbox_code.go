package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/evanw/esbuild/pkg/api"
)

// Daytona's code routes: POST /process/code-run (codeRun) and the stateful
// interpreter (/process/interpreter/context…, the WebSocket
// /process/interpreter/execute). Where the sandbox's template has the code
// interpreter (docs/code-interpreter.md: kernels on port 49999 inside the
// sandbox), both run on its kernels; elsewhere codeRun starts a fresh
// interpreter per call and the interpreter routes refuse. Every codeRun
// answer says which in "interpreter".

// codeServer is the sandbox's code-interpreter server, spoken to in its
// native format (/v1/execute NDJSON events, /v1/contexts).
type codeServer struct {
	base string // http://127.0.0.1:49999; "" when the template has none
	hc   *http.Client
	mu   sync.Mutex
	// created remembers when contexts made through the toolbox were made
	// (the server does not say; Daytona's context has createdAt).
	created map[string]time.Time
}

func newCodeServer(base string) *codeServer {
	return &codeServer{base: strings.TrimRight(base, "/"), hc: &http.Client{}, created: map[string]time.Time{}}
}

func (c *codeServer) available() bool { return c.base != "" }

// codeReady answers ptd's GET /code/ready: 204 once the sandbox's
// code-interpreter server has its default Python kernel up (the server
// starts it at boot; asking runs nothing in it), or at once in a sandbox
// without the server. A warm pool hands out a code-interpreter sandbox
// only then, so a warm create's first cell does not wait for IPython
// (docs/code-interpreter.md, "The first result").
func (tb *toolbox) codeReady(w http.ResponseWriter, r *http.Request) {
	if tb.code.available() {
		resp, err := tb.code.do(r.Context(), http.MethodGet, "/health?kernel=python", nil)
		if err != nil {
			writeHTTPError(w, http.StatusServiceUnavailable, err.Error(), "code_interpreter_unavailable")
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	w.WriteHeader(http.StatusNoContent)
}

// errNoInterpreter answers interpreter calls in a sandbox without kernels.
var errNoInterpreter = tbErr(http.StatusBadRequest, "BAD_REQUEST",
	"this sandbox's template has no code interpreter (create the sandbox from snapshot code-interpreter); "+
		"process.codeRun works everywhere, on a fresh interpreter per call")

// codeBootWait bounds how long a call waits for a server that is not
// listening yet (right after the sandbox booted).
const codeBootWait = 20 * time.Second

// do sends one request to the server, retrying refused connections while
// it comes up, and maps its error answers ({code, error}) onto the
// daemon's.
func (c *codeServer) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	if !c.available() {
		return nil, errNoInterpreter
	}
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(codeBootWait)
	for {
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) && time.Now().Before(deadline) && ctx.Err() == nil {
				select {
				case <-time.After(200 * time.Millisecond):
					continue
				case <-ctx.Done():
				}
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, tbErr(http.StatusServiceUnavailable, "INTERNAL_SERVER_ERROR", "the sandbox's code interpreter did not answer: %v", err)
		}
		if resp.StatusCode < 300 {
			return resp, nil
		}
		defer resp.Body.Close()
		var e struct{ Code, Error string }
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		switch resp.StatusCode {
		case http.StatusNotFound:
			return nil, tbErr(http.StatusNotFound, "NOT_FOUND", "%s", e.Error)
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			return nil, tbErr(http.StatusBadRequest, "BAD_REQUEST", "%s", e.Error)
		}
		return nil, tbErr(http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "code interpreter: %d %s", resp.StatusCode, e.Error)
	}
}

// codeCell is one execution request in the server's native format.
type codeCell struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id,omitempty"`
	Language  string            `json:"language,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	TimeoutMs int64             `json:"timeout_ms,omitempty"`
}

// codeEvent is one of the server's events: stdout/stderr (Text), result
// (Data, IsMainResult), error (Name, Value, Traceback), kernel_restarted
// (Reason) and the final end (ContextID, Status: ok, error, timeout or
// interrupted).
type codeEvent struct {
	Type         string         `json:"type"`
	Text         string         `json:"text"`
	Data         map[string]any `json:"data"`
	IsMainResult bool           `json:"is_main_result"`
	Name         string         `json:"name"`
	Value        string         `json:"value"`
	Traceback    string         `json:"traceback"`
	Reason       string         `json:"reason"`
	ContextID    string         `json:"context_id"`
	Status       string         `json:"status"`
}

// execute runs a cell, calling fn for every event before the end, and
// returns the end event. Cancelling ctx interrupts the cell (the server
// watches the connection).
func (c *codeServer) execute(ctx context.Context, cell codeCell, fn func(codeEvent) error) (codeEvent, error) {
	resp, err := c.do(ctx, http.MethodPost, "/v1/execute", cell)
	if err != nil {
		return codeEvent{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20) // a PNG result is one line
	for sc.Scan() {
		var ev codeEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return codeEvent{}, fmt.Errorf("code interpreter event: %w", err)
		}
		if ev.Type == "end" {
			return ev, nil
		}
		if err := fn(ev); err != nil {
			return codeEvent{}, err
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return codeEvent{}, fmt.Errorf("code interpreter stream: %w", err)
	}
	if ctx.Err() != nil {
		return codeEvent{}, ctx.Err()
	}
	return codeEvent{}, errors.New("code interpreter: the stream ended without an end event")
}

// codeRunRequest is the daemon's CodeRunRequest.
type codeRunRequest struct {
	Code     string            `json:"code"`
	Language string            `json:"language"`
	Argv     []string          `json:"argv"`
	Envs     map[string]string `json:"envs"`
	Timeout  *int              `json:"timeout"`
}

// codeRun is POST /process/code-run {code, language, argv?, envs?,
// timeout?}: {exitCode, result (stdout and stderr as they came),
// artifacts: {charts}, interpreter}. With the code interpreter and no
// argv the code runs in the language's default kernel context, so state
// carries over between calls and PNG figures come back as charts;
// otherwise on a fresh python3 or node process (argv needs one: a kernel
// has no command line).
func (tb *toolbox) codeRun(w http.ResponseWriter, r *http.Request) error {
	var req codeRunRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := validEnvKeys(req.Envs); err != nil {
		return err
	}
	if req.Timeout != nil && *req.Timeout < 0 {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "timeout must not be negative")
	}
	switch req.Language {
	case "":
		req.Language = "python"
	case "python", "javascript", "typescript":
	default:
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "language %q is not supported (python, javascript, typescript)", req.Language)
	}
	if tb.code.available() && len(req.Argv) == 0 {
		return tb.codeRunKernel(w, r, req)
	}
	return tb.codeRunFresh(w, r, req)
}

// chart is a figure in Daytona's chart shape: the PNG only (Platinum does
// not extract the plotted elements), type "unknown".
type chart struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	PNG      string `json:"png"`
	Elements []any  `json:"elements"`
}

func (tb *toolbox) codeRunKernel(w http.ResponseWriter, r *http.Request, req codeRunRequest) error {
	cell := codeCell{Code: req.Code, Language: req.Language, Env: req.Envs}
	if t := seconds(req.Timeout); t > 0 {
		cell.TimeoutMs = t.Milliseconds()
	}
	var out bytes.Buffer
	charts := []chart{}
	exit := 0
	end, err := tb.code.execute(r.Context(), cell, func(ev codeEvent) error {
		switch ev.Type {
		case "stdout", "stderr":
			out.WriteString(ev.Text)
		case "error":
			exit = errorExitCode(ev)
			if exit != 0 {
				out.WriteString(errorText(ev))
			}
		case "kernel_restarted":
			out.WriteString("[platinum] " + ev.Reason + "\n")
		case "result":
			if png, ok := ev.Data["image/png"].(string); ok {
				charts = append(charts, chart{Type: "unknown", PNG: png, Elements: []any{}})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch end.Status {
	case "timeout":
		return tbErr(http.StatusRequestTimeout, "PROCESS_EXECUTION_TIMEOUT", "code run timed out after %d seconds", *req.Timeout)
	case "interrupted":
		exit = 130
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"exitCode": exit, "result": out.String(), "artifacts": map[string]any{"charts": charts},
		"interpreter": "the sandbox's code interpreter, context " + end.ContextID + ": state is kept between calls",
	})
	return nil
}

// errorExitCode is the exit status a script would have had: SystemExit's
// code, else 1.
func errorExitCode(ev codeEvent) int {
	if ev.Name == "SystemExit" {
		if n, err := strconv.Atoi(strings.TrimSpace(ev.Value)); err == nil {
			return n
		}
		if strings.TrimSpace(ev.Value) == "" || ev.Value == "None" {
			return 0
		}
	}
	return 1
}

func errorText(ev codeEvent) string {
	if ev.Traceback != "" {
		return strings.TrimRight(ev.Traceback, "\n") + "\n"
	}
	return ev.Name + ": " + ev.Value + "\n"
}

// codeRunFresh runs the code on a new interpreter process: python3 -c, or
// node -e with TypeScript's types stripped first (esbuild, in pt-agent, so
// the template needs no compiler; types are not checked, as tsx does).
func (tb *toolbox) codeRunFresh(w http.ResponseWriter, r *http.Request, req codeRunRequest) error {
	code := req.Code
	var argv []string
	switch req.Language {
	case "python":
		argv = []string{"python3", "-c", code}
	case "typescript":
		js, err := stripTypes(code)
		if err != nil {
			writeJSON(w, http.StatusOK, map[string]any{"exitCode": 1, "result": err.Error() + "\n",
				"artifacts": map[string]any{"charts": []any{}}, "interpreter": freshInterpreter("node")})
			return nil
		}
		code = js
		fallthrough
	case "javascript":
		argv = []string{"node", "-e", code}
		if len(req.Argv) > 0 {
			argv = append(argv, "--")
		}
	}
	argv = append(argv, req.Argv...)
	res, err := tb.run(r.Context(), argv, req.Envs, "", seconds(req.Timeout))
	if err != nil {
		return err
	}
	if res.timedOut {
		return tbErr(http.StatusRequestTimeout, "PROCESS_EXECUTION_TIMEOUT", "code run timed out after %d seconds", *req.Timeout)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"exitCode": res.exitCode, "result": string(res.combined),
		"artifacts": map[string]any{"charts": []any{}}, "interpreter": freshInterpreter(argv[0]),
	})
	return nil
}

func freshInterpreter(bin string) string {
	return "a fresh " + bin + " process per call: no state is kept between calls"
}

// stripTypes turns TypeScript into JavaScript node runs as a script. A
// syntax error reads like node's: "file:line:column: message".
func stripTypes(code string) (string, error) {
	res := api.Transform(code, api.TransformOptions{Loader: api.LoaderTS, Sourcefile: "code.ts", Target: api.ESNext})
	if len(res.Errors) > 0 {
		var b strings.Builder
		for _, m := range res.Errors {
			if l := m.Location; l != nil {
				fmt.Fprintf(&b, "%s:%d:%d: ", l.File, l.Line, l.Column+1)
			}
			b.WriteString("SyntaxError: " + m.Text)
			b.WriteByte('\n')
		}
		return "", errors.New(strings.TrimRight(b.String(), "\n"))
	}
	return string(res.Code), nil
}

// interpreterContext is Daytona's InterpreterContext.
type interpreterContext struct {
	ID        string `json:"id"`
	Language  string `json:"language"`
	Cwd       string `json:"cwd"`
	CreatedAt string `json:"createdAt"`
	Active    bool   `json:"active"`
}

// nativeContext is the server's context view.
type nativeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
	Default  bool   `json:"default"`
}

func (c *codeServer) view(n nativeContext) interpreterContext {
	c.mu.Lock()
	at, ok := c.created[n.ID]
	c.mu.Unlock()
	v := interpreterContext{ID: n.ID, Language: n.Language, Cwd: n.Cwd, Active: true}
	if ok {
		v.CreatedAt = at.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// createContext is POST /process/interpreter/context {cwd?, language?}: a
// new kernel (python by default; javascript, typescript and bash too).
func (tb *toolbox) createContext(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Cwd      string `json:"cwd"`
		Language string `json:"language"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Language == "" {
		req.Language = "python"
	}
	body := map[string]string{"language": req.Language}
	if req.Cwd != "" {
		body["cwd"] = req.Cwd
	}
	resp, err := tb.code.do(r.Context(), http.MethodPost, "/v1/contexts", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var n nativeContext
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		return fmt.Errorf("code interpreter context: %w", err)
	}
	tb.code.mu.Lock()
	tb.code.created[n.ID] = time.Now()
	tb.code.mu.Unlock()
	writeJSON(w, http.StatusOK, tb.code.view(n))
	return nil
}

// listContexts is GET /process/interpreter/context: {contexts}, the
// user's contexts (the per-language defaults left out, as the daemon
// leaves out its default).
func (tb *toolbox) listContexts(w http.ResponseWriter, r *http.Request) error {
	resp, err := tb.code.do(r.Context(), http.MethodGet, "/v1/contexts", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var all []nativeContext
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		return fmt.Errorf("code interpreter contexts: %w", err)
	}
	out := []interpreterContext{}
	for _, n := range all {
		if !n.Default {
			out = append(out, tb.code.view(n))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"contexts": out})
	return nil
}

func (tb *toolbox) deleteContext(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if id == "default" || strings.HasPrefix(id, "ctx_default_") {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "cannot delete the default context")
	}
	resp, err := tb.code.do(r.Context(), http.MethodDelete, "/v1/contexts/"+url.PathEscape(id), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	tb.code.mu.Lock()
	delete(tb.code.created, id)
	tb.code.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"message": "Context deleted successfully"})
	return nil
}

// Close codes of the interpreter WebSocket the SDK tells apart: 4008 is
// its DaytonaTimeoutError.
const closeTimeout websocket.StatusCode = 4008

// interpreterExecute is the WebSocket /process/interpreter/execute: the
// client sends {code, contextId?, envs?, timeout? (seconds; default 600,
// 0 none)}; the server sends {type: stdout|stderr, text}, {type: error,
// name, value, traceback} and {type: control, text: completed|interrupted},
// then closes normally; a timeout closes with 4008. Results (the last
// expression's value, display()) are not sent: Daytona's interpreter
// runs cells as exec() and has none.
func (tb *toolbox) interpreterExecute(w http.ResponseWriter, r *http.Request) error {
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil // Accept answered
	}
	defer conn.CloseNow()
	conn.SetReadLimit(4 << 20)
	fail := func(code websocket.StatusCode, msg string) error {
		if len(msg) > 120 { // a close reason is at most 123 bytes
			msg = msg[:120]
		}
		conn.Close(code, msg)
		return nil
	}
	if !tb.code.available() {
		return fail(websocket.StatusPolicyViolation, "this sandbox's template has no code interpreter")
	}
	rctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	_, msg, err := conn.Read(rctx)
	cancel()
	if err != nil {
		return fail(websocket.StatusProtocolError, "failed to read first message")
	}
	var req struct {
		Code      string            `json:"code"`
		ContextID string            `json:"contextId"`
		Envs      map[string]string `json:"envs"`
		Timeout   *int              `json:"timeout"`
	}
	if err := json.Unmarshal(msg, &req); err != nil {
		return fail(websocket.StatusProtocolError, "invalid JSON payload")
	}
	if strings.TrimSpace(req.Code) == "" {
		return fail(websocket.StatusPolicyViolation, "code is required")
	}
	if validEnvKeys(req.Envs) != nil {
		return fail(websocket.StatusPolicyViolation, "envs: invalid variable name")
	}
	timeout := 10 * time.Minute
	if req.Timeout != nil {
		if *req.Timeout < 0 {
			return fail(websocket.StatusPolicyViolation, "timeout must be greater than or equal to 0")
		}
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	cell := codeCell{Code: req.Code, Env: req.Envs, TimeoutMs: timeout.Milliseconds()}
	if req.ContextID != "" && req.ContextID != "default" {
		cell.ContextID = req.ContextID
	} else {
		cell.Language = "python"
	}
	ctx := conn.CloseRead(r.Context()) // a client that goes away interrupts the cell
	send := func(v any) error {
		b, _ := json.Marshal(v)
		return conn.Write(ctx, websocket.MessageText, b)
	}
	end, err := tb.code.execute(ctx, cell, func(ev codeEvent) error {
		switch ev.Type {
		case "stdout", "stderr":
			return send(map[string]string{"type": ev.Type, "text": ev.Text})
		case "error":
			return send(map[string]string{"type": "error", "name": ev.Name, "value": ev.Value, "traceback": ev.Traceback})
		case "kernel_restarted":
			return send(map[string]string{"type": "stderr", "text": "[platinum] " + ev.Reason + "\n"})
		}
		return nil
	})
	if err != nil {
		var te *toolboxError
		if errors.As(err, &te) && te.status == http.StatusNotFound {
			return fail(websocket.StatusPolicyViolation, "context not found: "+req.ContextID)
		}
		if ctx.Err() != nil {
			return nil
		}
		return fail(websocket.StatusInternalError, err.Error())
	}
	switch end.Status {
	case "timeout":
		return fail(closeTimeout, "execution timed out")
	case "interrupted":
		_ = send(map[string]string{"type": "control", "text": "interrupted"})
	default:
		_ = send(map[string]string{"type": "control", "text": "completed"})
	}
	conn.Close(websocket.StatusNormalClosure, "")
	return nil
}
