// Package codeinterp drives POST /v1/sandboxes/:id/code and its contexts
// end to end against a real ptd, on runc and gVisor: real IPython kernels,
// node and bash contexts in sandboxes of the code-interpreter template.
package codeinterp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/testenv"
)

var env struct {
	url, token, binDir string
	skip               string
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	env.skip = "code-interpreter tests need root (they run real sandboxes)"
	// The template's first build takes minutes on a cold cache (longer
	// under load); every test after it extracts it from the cache.
	o := ptdtest.Options{ExtraArgs: []string{"--pids-limit", "512"}, Warm: []string{"code-interpreter"}}
	return ptdtest.Main(m, "codeinterp", o, func(d *ptdtest.Daemon) error {
		env.url, env.token, env.binDir, env.skip = d.URL, d.Token, d.BinDir, ""
		return nil
	})
}

type client struct {
	t     *testing.T
	token string
}

type response = ptdtest.Response

func newClient(t *testing.T) *client {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	return &client{t: t, token: env.token}
}

func (c *client) raw(method, path string, body any) (response, error) {
	req, err := http.NewRequest(method, env.url+path, ptdtest.JSONBody(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	return ptdtest.Send(&http.Client{Timeout: 30 * time.Minute}, req)
}

func (c *client) do(method, path string, body any) response {
	c.t.Helper()
	r, err := c.raw(method, path, body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// create makes a running code-interpreter sandbox on runtime and deletes
// it when the test ends.
func (c *client) create(runtime string) string {
	c.t.Helper()
	body := map[string]any{"template": "code-interpreter"}
	if runtime != "" {
		body["runtime"] = runtime
	}
	r := c.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", body)
	if r.Status != 201 && r.Status != 202 { // 202: the wait ran out under load; poll below
		c.t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id, _ := r.JSON()["id"].(string)
	if id == "" {
		c.t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	c.t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	for deadline := time.Now().Add(10 * time.Minute); r.JSON()["state"] != "running"; {
		switch st := r.JSON()["state"]; {
		case st == "failed" || st == "deleted" || st == "deleting":
			c.t.Fatalf("create: sandbox %s is %v: %s", id, st, r.Body)
		case time.Now().After(deadline):
			c.t.Fatalf("create: sandbox %s still %v after 10 min", id, st)
		}
		time.Sleep(time.Second)
		r = c.do("GET", "/v1/sandboxes/"+id, nil)
	}
	return id
}

// event is one NDJSON event of a cell.
type event struct {
	Type           string         `json:"type"`
	Text           string         `json:"text"`
	Data           map[string]any `json:"data"`
	IsMainResult   bool           `json:"is_main_result"`
	Name           string         `json:"name"`
	Value          string         `json:"value"`
	Traceback      string         `json:"traceback"`
	Reason         string         `json:"reason"`
	ExecutionID    string         `json:"execution_id"`
	ContextID      string         `json:"context_id"`
	ExecutionCount *int           `json:"execution_count"`
	Status         string         `json:"status"`
	DurationMS     float64        `json:"duration_ms"`
}

// cell is a finished cell's events.
type cell []event

func (c cell) end() event { return c[len(c)-1] }

func (c cell) main() (event, bool) {
	for _, e := range c {
		if e.Type == "result" && e.IsMainResult {
			return e, true
		}
	}
	return event{}, false
}

func (c cell) text() string {
	m, _ := c.main()
	s, _ := m.Data["text/plain"].(string)
	return s
}

func (c cell) err() (event, bool) {
	for _, e := range c {
		if e.Type == "error" {
			return e, true
		}
	}
	return event{}, false
}

func (c cell) stdout() string {
	var b strings.Builder
	for _, e := range c {
		if e.Type == "stdout" {
			b.WriteString(e.Text)
		}
	}
	return b.String()
}

// run runs one cell (streamed) and checks the stream's shape: NDJSON
// events, exactly one end, last.
func (c *client) run(id string, body map[string]any) cell {
	c.t.Helper()
	r := c.do("POST", "/v1/sandboxes/"+id+"/code", body)
	if r.Status != 200 {
		c.t.Fatalf("run %v: %d %s", body, r.Status, r.Body)
	}
	var out cell
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			c.t.Fatalf("event %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	if len(out) == 0 || out.end().Type != "end" {
		c.t.Fatalf("run %v: no end event last: %s", body, r.Body)
	}
	for _, e := range out[:len(out)-1] {
		if e.Type == "end" {
			c.t.Fatalf("two end events: %s", r.Body)
		}
	}
	return out
}

func (c *client) py(id, code string) cell {
	c.t.Helper()
	return c.run(id, map[string]any{"code": code})
}

func TestRunCodeRunc(t *testing.T)   { testRunCode(t, "runc") }
func TestRunCodeGVisor(t *testing.T) { testenv.RequiresCommand(t, "runsc"); testRunCode(t, "gvisor") }

// testRunCode is the code API's contract on one runtime class.
func testRunCode(t *testing.T, runtime string) {
	c := newClient(t)
	id := c.create(runtime)
	// Each subtest gets a client failing it, not the whole test, and the
	// one sandbox they share: they run in order, on its state.
	sub := func(name string, f func(t *testing.T, c *client, id string)) {
		t.Run(name, func(t *testing.T) { f(t, &client{t: t, token: c.token}, id) })
	}

	// First, before any call reaches the server (coldstart_test.go).
	sub("the default kernel starts at boot", testKernelAtBoot)
	sub("the template has compiled bytecode for the kernel's modules", testTemplateBytecode)
	sub("the server runs kernels without jupyter_client", testServerWithoutJupyterClient)
	sub("modules the kernel's start leaves out load on use", testLaterModules)

	sub("state across calls", func(t *testing.T, c *client, id string) {
		first := c.py(id, "x = 41")
		if _, ok := first.main(); ok {
			t.Errorf("an assignment has a main result: %v", first)
		}
		got := c.py(id, "x + 1")
		if got.text() != "42" || got.end().Status != "ok" || got.end().ExecutionCount == nil ||
			*got.end().ExecutionCount <= *first.end().ExecutionCount {
			t.Errorf("x + 1 = %+v", got)
		}
		if got.end().ContextID != "ctx_default_python" {
			t.Errorf("default context %q", got.end().ContextID)
		}
	})

	sub("stdout then result then end, and the document form", func(t *testing.T, c *client, id string) {
		got := c.py(id, "print('hello')\nx * 2")
		var types []string
		for _, e := range got {
			types = append(types, e.Type)
		}
		if strings.Join(types, ",") != "stdout,result,end" || got.stdout() != "hello\n" || got.text() != "82" {
			t.Errorf("events %v: %+v", types, got)
		}
		r := c.do("POST", "/v1/sandboxes/"+id+"/code?stream=false", map[string]any{"code": "print('doc')\nx"})
		var doc struct {
			Events  []event `json:"events"`
			Stdout  string  `json:"stdout"`
			Results []event `json:"results"`
			Error   *event  `json:"error"`
			Status  string  `json:"status"`
			Count   *int    `json:"execution_count"`
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil || r.Status != 200 {
			t.Fatalf("document: %d %s", r.Status, r.Body)
		}
		if doc.Stdout != "doc\n" || len(doc.Results) != 1 || doc.Results[0].Data["text/plain"] != "41" || doc.Error != nil ||
			doc.Status != "ok" || doc.Count == nil || len(doc.Events) != 3 {
			t.Errorf("document %s", r.Body)
		}
	})

	sub("matplotlib PNG and DataFrame HTML", func(t *testing.T, c *client, id string) {
		got := c.py(id, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()")
		rs := got.results()
		if len(rs) != 1 || rs[0].IsMainResult {
			t.Fatalf("plt.show(): %+v", got)
		}
		decodeImage(t, rs[0], "image/png", "png")
		df := c.py(id, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
		m, _ := df.main()
		if html, _ := m.Data["text/html"].(string); !strings.Contains(html, "<table") || !strings.Contains(html, "<td>x</td>") {
			t.Errorf("DataFrame: %+v", df)
		}
	})

	sub("display, _repr_html_, SVG, JSON, Markdown, LaTeX, a figure as the last expression, JPEG, PDF, scipy", testRichResults)

	sub("stdout streams, cwd lasts one call, end has the execution's id and duration", testStreamingCwdDuration)

	sub("error with traceback, context survives", func(t *testing.T, c *client, id string) {
		got := c.py(id, "def f():\n    return 1/0\nf()")
		e, ok := got.err()
		if !ok || e.Name != "ZeroDivisionError" || e.Value != "division by zero" || !strings.Contains(e.Traceback, "return 1/0") ||
			got.end().Status != "error" {
			t.Errorf("1/0: %+v", got)
		}
		if s := c.py(id, "x").text(); s != "41" {
			t.Errorf("after the error x = %q", s)
		}
	})

	// ipykernel aborts the requests that reach it in the moment after an
	// error reply unless a request says otherwise: a cell sent right after
	// a failed one then came back "ok" with no result and no error.
	sub("the cell right after an error runs", func(t *testing.T, c *client, id string) {
		for i := range 40 {
			c.py(id, "raise ValueError('no')")
			if got := c.py(id, fmt.Sprintf("%d * 2", i)); got.text() != strconv.Itoa(i*2) {
				t.Fatalf("try %d: the cell after the error: %+v", i, got)
			}
		}
	})

	sub("timeout interrupts and the context keeps its variables", func(t *testing.T, c *client, id string) {
		c.py(id, "kept = 'still here'")
		got := c.run(id, map[string]any{"code": "while True:\n    pass", "timeout_ms": 2000})
		if e, ok := got.err(); !ok || e.Name != "TimeoutError" || got.end().Status != "timeout" {
			t.Errorf("timed-out cell: %+v", got)
		}
		if after := c.py(id, "kept"); after.text() != "'still here'" {
			t.Errorf("after the timeout kept = %q: %+v", after.text(), after)
		}
	})

	sub("a client disconnect interrupts the cell", func(t *testing.T, c *client, id string) {
		ctx, cancel := context.WithCancel(context.Background())
		b, _ := json.Marshal(map[string]any{"code": "import time\nprint('started', flush=True)\ntime.sleep(60)\nfinished = True"})
		req, _ := http.NewRequestWithContext(ctx, "POST", env.url+"/v1/sandboxes/"+id+"/code", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		if !strings.Contains(line, "started") {
			t.Fatalf("first event %q", line)
		}
		cancel()
		resp.Body.Close()
		// Were the cell still sleeping, this one would wait behind it and
		// time out instead.
		got := c.run(id, map[string]any{"code": "'finished' in globals()", "timeout_ms": 20000})
		if got.text() != "False" || got.end().Status != "ok" {
			t.Errorf("after the disconnect: %+v", got)
		}
	})

	sub("interrupt stops the running cell and keeps state", func(t *testing.T, c *client, id string) {
		path := "/v1/sandboxes/" + id + "/code/contexts/ctx_default_python/interrupt"
		if r := c.do("POST", path, nil); r.Status != 200 || r.JSON()["interrupted"] != false {
			t.Errorf("idle interrupt: %d %s", r.Status, r.Body)
		}
		// The cell runs streamed; once its first line says it is past
		// `before = 1`, interrupt it and read the rest.
		b, _ := json.Marshal(map[string]any{"code": "import time\nbefore = 1\nprint('sleeping', flush=True)\ntime.sleep(60)\nafter = 1"})
		req, _ := http.NewRequest("POST", env.url+"/v1/sandboxes/"+id+"/code", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		if line, _ := rd.ReadString('\n'); !strings.Contains(line, "sleeping") {
			t.Fatalf("first event %q", line)
		}
		if r := c.do("POST", path, nil); r.Status != 200 || r.JSON()["interrupted"] != true {
			t.Fatalf("interrupt: %d %s", r.Status, r.Body)
		}
		var got cell
		for {
			line, err := rd.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				var e event
				if err := json.Unmarshal(line, &e); err != nil {
					t.Fatalf("event %q: %v", line, err)
				}
				got = append(got, e)
			}
			if err != nil {
				break
			}
		}
		if e, ok := got.err(); !ok || e.Name != "Interrupted" || len(got) == 0 || got.end().Status != "interrupted" {
			t.Errorf("interrupted cell: %+v", got)
		}
		if s := c.py(id, "('before' in globals(), 'after' in globals())").text(); s != "(True, False)" {
			t.Errorf("after the interrupt: %q", s)
		}
		if r := c.do("POST", "/v1/sandboxes/"+id+"/code/contexts/ctx_nope/interrupt", nil); r.Status != 404 {
			t.Errorf("interrupt of an unknown context: %d", r.Status)
		}
	})

	sub("DELETE of an execution stops it, and a waiting one never runs", testDeleteExecution)

	sub("contexts are separate, restart drops state, delete removes", func(t *testing.T, c *client, id string) {
		r := c.do("POST", "/v1/sandboxes/"+id+"/code/contexts", map[string]any{"language": "python", "cwd": "/tmp"})
		ctxID, _ := r.JSON()["id"].(string)
		if r.Status != 201 || !strings.HasPrefix(ctxID, "ctx_") || r.JSON()["cwd"] != "/tmp" {
			t.Fatalf("create context: %d %s", r.Status, r.Body)
		}
		c.run(id, map[string]any{"code": "secret = 7", "context_id": ctxID})
		if s := c.run(id, map[string]any{"code": "import os\n(secret, os.getcwd())", "context_id": ctxID}).text(); s != "(7, '/tmp')" {
			t.Errorf("own context: %q", s)
		}
		if e, ok := c.py(id, "secret").err(); !ok || e.Name != "NameError" {
			t.Errorf("the default context sees secret")
		}
		list := c.do("GET", "/v1/sandboxes/"+id+"/code/contexts", nil)
		if !strings.Contains(string(list.Body), ctxID) || !strings.Contains(string(list.Body), "ctx_default_python") {
			t.Errorf("list: %s", list.Body)
		}
		if r := c.do("POST", "/v1/sandboxes/"+id+"/code/contexts/"+ctxID+"/restart", nil); r.Status != 200 {
			t.Errorf("restart: %d %s", r.Status, r.Body)
		}
		if e, ok := c.run(id, map[string]any{"code": "secret", "context_id": ctxID}).err(); !ok || e.Name != "NameError" {
			t.Errorf("restart kept secret")
		}
		if r := c.do("DELETE", "/v1/sandboxes/"+id+"/code/contexts/"+ctxID, nil); r.Status != 204 {
			t.Errorf("delete: %d %s", r.Status, r.Body)
		}
		if r := c.do("POST", "/v1/sandboxes/"+id+"/code", map[string]any{"code": "1", "context_id": ctxID}); r.Status != 404 || r.JSON()["code"] != "not_found" {
			t.Errorf("deleted context: %d %s", r.Status, r.Body)
		}
	})

	sub("javascript and bash keep state", func(t *testing.T, c *client, id string) {
		c.run(id, map[string]any{"code": "var n = 20; const k = 1", "language": "javascript"})
		js := c.run(id, map[string]any{"code": "console.log('hi'); n + k + 21", "language": "javascript"})
		if js.text() != "42" || js.stdout() != "hi\n" {
			t.Errorf("javascript: %+v", js)
		}
		if e, ok := c.run(id, map[string]any{"code": "null.x", "language": "javascript"}).err(); !ok || e.Name != "TypeError" {
			t.Errorf("javascript error: %+v", e)
		}
		c.run(id, map[string]any{"code": "cd /tmp; V=shell-state", "language": "bash"})
		sh := c.run(id, map[string]any{"code": "echo $V $(pwd); echo oops >&2", "language": "bash"})
		if sh.stdout() != "shell-state /tmp\n" || sh.end().Status != "ok" {
			t.Errorf("bash: %+v", sh)
		}
		if got := c.run(id, map[string]any{"code": "false", "language": "bash"}); got.end().Status != "error" {
			t.Errorf("bash false: %+v", got)
		}
	})

	sub("typescript strips types, keeps state apart from javascript, and reports syntax errors", func(t *testing.T, c *client, id string) {
		c.run(id, map[string]any{"code": "interface P { a: number }\nconst p: P = { a: 40 }\nfunction twice<T>(x: T): T[] { return [x, x] }", "language": "typescript"})
		ts := c.run(id, map[string]any{"code": "twice<number>(p.a).length + p.a", "language": "typescript"})
		if ts.text() != "42" || ts.end().ContextID != "ctx_default_typescript" {
			t.Errorf("typescript: %+v", ts)
		}
		if js := c.run(id, map[string]any{"code": "typeof p", "language": "javascript"}); js.text() != "'undefined'" {
			t.Errorf("javascript sees the typescript context's p: %+v", js)
		}
		if e, ok := c.run(id, map[string]any{"code": "let x: = 1", "language": "typescript"}).err(); !ok || e.Name != "SyntaxError" || !strings.Contains(e.Traceback, "<cell>:1:") {
			t.Errorf("typescript syntax error: %+v", e)
		}
		if imp := c.run(id, map[string]any{"code": "import os from 'os'\ntypeof os.cpus", "language": "typescript"}); imp.text() != "'function'" {
			t.Errorf("typescript import: %+v", imp)
		}
	})

	sub("env patch is seen by the next run, per-call env only by its own", func(t *testing.T, c *client, id string) {
		if r := c.do("PATCH", "/v1/sandboxes/"+id+"/env", map[string]any{"env": map[string]string{"CI_PATCHED": "v1"}}); r.Status != 200 {
			t.Fatalf("patch env: %d %s", r.Status, r.Body)
		}
		if s := c.py(id, "import os\nos.environ.get('CI_PATCHED')").text(); s != "'v1'" {
			t.Errorf("python after the patch: %q", s)
		}
		if s := c.run(id, map[string]any{"code": "process.env.CI_PATCHED", "language": "javascript"}).text(); s != "'v1'" {
			t.Errorf("javascript after the patch: %q", s)
		}
		if s := c.run(id, map[string]any{"code": "echo $CI_PATCHED", "language": "bash"}).stdout(); s != "v1\n" {
			t.Errorf("bash after the patch: %q", s)
		}
		if s := c.run(id, map[string]any{"code": "os.environ.get('CI_CALL')", "env": map[string]string{"CI_CALL": "once"}}).text(); s != "'once'" {
			t.Errorf("per-call env: %q", s)
		}
		if s := c.py(id, "repr(os.environ.get('CI_CALL'))").text(); s != `'None'` {
			t.Errorf("per-call env outlived its call: %q", s)
		}
	})

	sub("an env removal is seen by the next run", testEnvRemoval)

	sub("timeouts and deletes in javascript, typescript and bash keep state", testInterruptsPerLanguage)

	sub("a cell ignoring SIGINT is killed after the grace period, and the next call says so", testHarderInterrupts)

	sub("javascript and bash processes that die are replaced, saying so", testProcessDeaths)
	sub("interrupts at random moments never end a context", testInterruptsAtRandom)

	sub("refused calls change nothing", func(t *testing.T, c *client, id string) {
		before := c.py(id, "1")
		big := strings.Repeat("#", 1<<20+1)
		for _, tc := range []struct {
			body   map[string]any
			status int
			code   string
		}{
			{map[string]any{"code": "1", "language": "cobol"}, 400, "invalid_request"},
			{map[string]any{"language": "python"}, 400, "invalid_request"},
			{map[string]any{"code": "1", "timeout_ms": 0}, 400, "invalid_request"},
			{map[string]any{"code": "1", "bogus": true}, 400, "invalid_request"},
			{map[string]any{"code": "1", "context_id": "ctx_nope"}, 404, "not_found"},
			{map[string]any{"code": "1", "cwd": "/no/such/dir"}, 400, "invalid_request"},
			{map[string]any{"code": big}, 413, "payload_too_large"},
		} {
			r := c.do("POST", "/v1/sandboxes/"+id+"/code", tc.body)
			if r.Status != tc.status || r.JSON()["code"] != tc.code {
				t.Errorf("%.60v: %d %.200s, want %d %s", tc.body, r.Status, r.Body, tc.status, tc.code)
			}
		}
		if r := c.do("POST", "/v1/sandboxes/"+id+"/code/contexts", map[string]any{"language": "cobol"}); r.Status != 400 {
			t.Errorf("context in cobol: %d %s", r.Status, r.Body)
		}
		after := c.py(id, "1")
		if *after.end().ExecutionCount != *before.end().ExecutionCount+1 {
			t.Errorf("refused calls ran cells: execution_count %d → %d", *before.end().ExecutionCount, *after.end().ExecutionCount)
		}
		r := c.do("POST", "/v1/orgs", map[string]any{"name": "code-other-" + ptdtest.RandHex(3)})
		other := &client{t: t, token: r.JSON()["token"].(string)}
		for p, body := range map[string]any{"/code": map[string]any{"code": "1"}, "/code/contexts": map[string]any{"language": "python"}} {
			if r := other.do("POST", "/v1/sandboxes/"+id+p, body); r.Status != 404 || r.JSON()["code"] != "not_found" {
				t.Errorf("another org's %s: %d %s", p, r.Status, r.Body)
			}
		}
		if r := other.do("GET", "/v1/sandboxes/"+id+"/code/contexts", nil); r.Status != 404 {
			t.Errorf("another org's list: %d", r.Status)
		}
	})

	sub("the server waits for kernel messages without an event loop per message", testKernelClientNoEventLoop)
	sub("the kernel's cached os.getpid is right in forked children", testKernelPidAfterFork)
	sub("output keeps its order through the IOPub thread", testOutputOrder)
	sub("a silent cell's head (its execution ID) comes before it ends", testSilentCellHead)

	sub("a cell that kills its kernel reports an error, the next gets a fresh kernel", func(t *testing.T, c *client, id string) {
		got := c.py(id, "import os\nos._exit(3)")
		if e, ok := got.err(); !ok || e.Name != "KernelDied" {
			t.Errorf("dying cell: %+v", got)
		}
		next := c.py(id, "'x' in globals()")
		if next[0].Type != "kernel_restarted" || next.text() != "False" {
			t.Errorf("after the crash: %+v", next)
		}
		if again := c.py(id, "1"); again[0].Type == "kernel_restarted" {
			t.Errorf("restart said twice")
		}
	})
}

// TestGVisorStopStartKeepsKernelState: a gVisor sandbox's stop keeps its
// memory, so after a start the kernel still has its variables.
func TestGVisorStopStartKeepsKernelState(t *testing.T) {
	testenv.RequiresCommand(t, "runsc")
	c := newClient(t)
	id := c.create("gvisor")
	c.py(id, "survivor = 'kept across stop'")
	c.run(id, map[string]any{"code": "var js = 5", "language": "javascript"})
	if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.JSON()["state"] != "stopped" {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	r := c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil)
	if r.JSON()["state"] != "running" {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	if got := r.JSON()["restore"]; got != "memory" {
		t.Fatalf("start restored %v, want memory", got)
	}
	got := c.py(id, "survivor")
	if got.text() != "'kept across stop'" || got[0].Type == "kernel_restarted" {
		t.Errorf("after stop/start: %+v", got)
	}
	if s := c.run(id, map[string]any{"code": "js * 2", "language": "javascript"}).text(); s != "10" {
		t.Errorf("javascript after stop/start: %q", s)
	}
}

// kernelClientProbe runs cells on a Python context of the sandbox's own
// server.py (imported, not the running server) and prints how many times
// an asyncio event loop waited (its selector's select), then the cells'
// results. The kernel shares the probe's stdout, so the answer is the last
// line.
const kernelClientProbe = `
import selectors, sys
sys.path.insert(0, "/run/platinum/code-interpreter")
import server
polls = []
select = selectors.DefaultSelector.select
def counted(self, timeout=None):
    polls.append(1)
    return select(self, timeout)
selectors.DefaultSelector.select = counted
ctx = server.PythonContext("ctx_probe", "python", "/", False)
events = []
for i in range(3):
    ctx.run("40 + %d" % i, {}, None, server.Cell(events.append, 60, lambda: True, ctx))
ctx.close()
print(len(polls), [e["data"]["text/plain"] for e in events if e["type"] == "result"])
`

// testKernelClientNoEventLoop: the server speaks to its kernels on
// blocking sockets. jupyter_client's BlockingKernelClient runs an asyncio
// event loop for every message it waits for, dozens of system calls each,
// which under gVisor were half of a steady-state cell's time
// (docs/code-interpreter.md, "Where a steady-state cell's time goes").
func testKernelClientNoEventLoop(t *testing.T, c *client, id string) {
	r := c.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{
		"cmd": []string{"python3", "-c", kernelClientProbe}, "timeout_ms": 120000})
	var out struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil || r.Status != 200 || out.ExitCode != 0 {
		t.Fatalf("probe: %d %s", r.Status, r.Body)
	}
	lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
	if got := lines[len(lines)-1]; got != "0 ['40', '41', '42']" {
		t.Errorf("event loops run, results = %s; want 0 ['40', '41', '42'] (stderr %.500s)", got, out.Stderr)
	}
}
