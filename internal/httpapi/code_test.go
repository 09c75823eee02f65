package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// codeHost starts sandboxes at once at 127.0.0.1, with the
// code-interpreter template among its slugs.
type codeHost struct{ *slowHost }

func (h *codeHost) Templates() []string {
	return []string{"busybox", controlplane.CodeInterpreterTemplate}
}

func (h *codeHost) Start(ctx context.Context, spec controlplane.StartSpec) (controlplane.Instance, error) {
	return controlplane.Instance{Address: "127.0.0.1"}, nil
}

// fakeCodeServer stands in for the code-interpreter server inside a
// sandbox (internal/agent/codeinterp/server.py): it records every request
// and answers /v1/execute with a fixed cell's events.
type fakeCodeServer struct {
	mu    sync.Mutex
	calls []string // "METHOD path body"
	// hold, when set, keeps a ctx_hold cell after its headers until closed.
	hold chan struct{}
}

func (f *fakeCodeServer) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeCodeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path+" "+string(b))
	f.mu.Unlock()
	fail := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"code": code, "error": msg})
	}
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/execute":
		var req struct {
			ContextID string `json:"context_id"`
		}
		json.Unmarshal(b, &req)
		switch req.ContextID {
		case "ctx_nope":
			fail(404, "not_found", "context ctx_nope not found")
			return
		case "ctx_huge":
			fail(413, "code_too_large", "request body over the limit")
			return
		case "ctx_cut": // the server goes away mid-cell: one event, then the connection drops
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("X-Execution-Id", "exec_cut")
			w.WriteHeader(200)
			fmt.Fprintln(w, `{"type":"stdout","text":"partial\n"}`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		case "ctx_hold": // a cell waiting behind another: headers, then nothing for a while
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("X-Execution-Id", "exec_held")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			select {
			case <-f.hold:
			case <-r.Context().Done():
			}
			fmt.Fprintln(w, `{"type":"end","execution_id":"exec_held","context_id":"ctx_hold","execution_count":1,"status":"ok","duration_ms":1}`)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("X-Execution-Id", "exec_0123")
		for _, ev := range []string{
			`{"type":"stdout","text":"a\n"}`,
			`{"type":"stderr","text":"warn\n"}`,
			`{"type":"stdout","text":"b\n"}`,
			`{"type":"result","is_main_result":false,"data":{"text/plain":"<shown>","image/svg+xml":"<svg/>"}}`,
			`{"type":"result","is_main_result":true,"data":{"text/plain":"42"}}`,
			`{"type":"error","name":"ValueError","value":"no","traceback":"tb"}`,
			`{"type":"end","execution_id":"exec_0123","context_id":"ctx_default_python","execution_count":3,"status":"error","duration_ms":1.5}`,
		} {
			fmt.Fprintln(w, ev)
		}
	case r.Method == "GET" && r.URL.Path == "/v1/executions":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[{"id":"exec_0123","context_id":"ctx_default_python","language":"python","state":"running","started_at":"2026-01-02T03:04:05.000006Z"}]`)
	case r.Method == "GET" && r.URL.Path == "/v1/contexts":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[]`)
	case r.Method == "DELETE" && r.URL.Path == "/v1/executions/exec_0123":
		w.WriteHeader(http.StatusNoContent)
	case r.Method == "DELETE" && strings.HasPrefix(r.URL.Path, "/v1/executions/"):
		fail(404, "not_found", "execution not found")
	default:
		fail(404, "not_found", "no route")
	}
}

// serveCode serves the API over codeHost, with every code-interpreter
// dial sent to the fake server (nil: to a closed port, as a sandbox that
// runs no server). The dial override is package state: these tests do
// not run in parallel.
func serveCode(t *testing.T, fake *fakeCodeServer) *httptest.Server {
	t.Helper()
	target := ""
	if fake != nil {
		fs := httptest.NewServer(fake)
		t.Cleanup(fs.Close)
		target = fs.Listener.Addr().String()
	} else {
		target = testenv.RefusedAddr(t)
	}
	saved := codeClient
	codeClient = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, target)
		},
		DisableCompression: true,
	}}
	t.Cleanup(func() { codeClient = saved })
	h := &codeHost{&slowHost{release: make(chan struct{})}}
	srv := serveHost(t, h, nil)
	t.Cleanup(func() { close(h.release) })
	return srv
}

// running creates a running sandbox of tpl and returns its ID.
func running(t *testing.T, srv *httptest.Server, tpl string) string {
	t.Helper()
	resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes?wait_for_state=running", `{"template":"`+tpl+`"}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create %s: %d %v", tpl, resp.StatusCode, m)
	}
	return m["id"].(string)
}

// TestRunCodeRefusesBadInput: a refused call answers a stable 4xx and
// never reaches the sandbox's server.
func TestRunCodeRefusesBadInput(t *testing.T) {
	fake := &fakeCodeServer{}
	srv := serveCode(t, fake)
	id := running(t, srv, controlplane.CodeInterpreterTemplate)
	overCode := strings.Repeat("#", controlplane.MaxCodeBytes+1)
	// Each \u0001 is 6 body bytes for 1 code byte: a body over the decode
	// limit whose code alone would be under the 1 MiB limit.
	overBody := strings.Repeat(`\u0001`, controlplane.MaxCodeBytes+64<<10)
	for _, tc := range []struct {
		name, query, body string
		status            int
		code, field       string
	}{
		{"no code", "", `{"language":"python"}`, 400, "invalid_request", "code"},
		{"unknown language", "", `{"code":"1","language":"cobol"}`, 400, "invalid_request", "language"},
		{"zero timeout", "", `{"code":"1","timeout_ms":0}`, 400, "invalid_request", "timeout_ms"},
		{"negative timeout", "", `{"code":"1","timeout_ms":-5}`, 400, "invalid_request", "timeout_ms"},
		{"unknown field", "", `{"code":"1","bogus":true}`, 400, "invalid_request", ""},
		{"code not a string", "", `{"code":1}`, 400, "invalid_request", ""},
		{"not JSON", "", `code=1`, 400, "invalid_request", ""},
		{"bad env key", "", `{"code":"1","env":{"A=B":"x"}}`, 400, "invalid_request", ""},
		{"bad stream flag", "?stream=maybe", `{"code":"1"}`, 400, "invalid_request", "stream"},
		{"code over 1 MiB", "", `{"code":"` + overCode + `"}`, 413, "payload_too_large", "code"},
		{"body over the decode limit", "", `{"code":"` + overBody + `"}`, 413, "payload_too_large", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/code"+tc.query, tc.body)
			if resp.StatusCode != tc.status || m["code"] != tc.code {
				t.Fatalf("%d %v, want %d %s", resp.StatusCode, m, tc.status, tc.code)
			}
			if tc.field != "" && m["field"] != tc.field {
				t.Errorf("field %v, want %s", m["field"], tc.field)
			}
		})
	}
	for _, body := range []string{`{"language":"cobol"}`, `{"language":"python","extra":1}`} {
		if resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/code/contexts", body); resp.StatusCode != 400 || m["code"] != "invalid_request" {
			t.Errorf("context %s: %d %v", body, resp.StatusCode, m)
		}
	}
	if got := fake.seen(); len(got) != 0 {
		t.Errorf("refused calls reached the sandbox: %q", got)
	}
}

// TestRunCodeRelays: ptd relays the server's events line by line with the
// execution's ID, folds them into one document with ?stream=false, and
// turns the server's own refusals into the API's.
func TestRunCodeRelays(t *testing.T) {
	fake := &fakeCodeServer{}
	srv := serveCode(t, fake)
	id := running(t, srv, controlplane.CodeInterpreterTemplate)

	resp := send(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/code", `{"code":"x","env":{"K":"v"},"cwd":"/tmp","timeout_ms":5}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" || resp.Header.Get("X-Execution-Id") != "exec_0123" {
		t.Fatalf("stream: %d %v", resp.StatusCode, resp.Header)
	}
	var types []string
	evs, _ := readNDJSON(t, resp.Body)
	for _, ev := range evs {
		types = append(types, ev["type"].(string))
	}
	if got := strings.Join(types, ","); got != "stdout,stderr,stdout,result,result,error,end" {
		t.Errorf("events %s", got)
	}
	calls := fake.seen()
	if len(calls) != 1 || !strings.Contains(calls[0], `"cwd":"/tmp"`) || !strings.Contains(calls[0], `"timeout_ms":5`) || !strings.Contains(calls[0], `"env":{"K":"v"}`) {
		t.Errorf("the server got %q", calls)
	}

	resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/code?stream=false", `{"code":"x"}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Execution-Id") != "exec_0123" {
		t.Fatalf("document: %d %v", resp.StatusCode, m)
	}
	results, _ := m["results"].([]any)
	events, _ := m["events"].([]any)
	e, _ := m["error"].(map[string]any)
	if m["stdout"] != "a\nb\n" || m["stderr"] != "warn\n" || len(results) != 2 || len(events) != 7 || e["name"] != "ValueError" ||
		m["execution_id"] != "exec_0123" || m["context_id"] != "ctx_default_python" || m["execution_count"] != 3.0 ||
		m["status"] != "error" || m["duration_ms"] != 1.5 {
		t.Errorf("document %v", m)
	}

	for _, tc := range []struct {
		ctx    string
		status int
		code   string
	}{{"ctx_nope", 404, "not_found"}, {"ctx_huge", 413, "payload_too_large"}} {
		if resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/code", `{"code":"1","context_id":"`+tc.ctx+`"}`); resp.StatusCode != tc.status || m["code"] != tc.code {
			t.Errorf("%s: %d %v", tc.ctx, resp.StatusCode, m)
		}
	}

	if resp, m := call(t, srv, "tok", "GET", "/v1/sandboxes/"+id+"/code/executions", ""); resp.StatusCode != 200 || len(m["executions"].([]any)) != 1 {
		t.Errorf("executions: %d %v", resp.StatusCode, m)
	}
	if resp, m := call(t, srv, "tok", "GET", "/v1/sandboxes/"+id+"/code/contexts", ""); resp.StatusCode != 200 || m["contexts"] == nil {
		t.Errorf("contexts: %d %v", resp.StatusCode, m)
	}
	if resp, _ := call(t, srv, "tok", "DELETE", "/v1/sandboxes/"+id+"/code/executions/exec_0123", ""); resp.StatusCode != 204 {
		t.Errorf("delete execution: %d", resp.StatusCode)
	}
	if resp, m := call(t, srv, "tok", "DELETE", "/v1/sandboxes/"+id+"/code/executions/exec_gone", ""); resp.StatusCode != 404 || m["code"] != "not_found" {
		t.Errorf("delete of an ended execution: %d %v", resp.StatusCode, m)
	}

	// Another org's token finds no sandbox: 404, and nothing is relayed.
	before := len(fake.seen())
	_, org := call(t, srv, "tok", "POST", "/v1/orgs", `{"name":"code-other"}`)
	other, _ := org["token"].(string)
	for _, c := range [][2]string{{"POST", "/code"}, {"GET", "/code/executions"}, {"DELETE", "/code/executions/exec_0123"}} {
		body := ""
		if c[0] == "POST" {
			body = `{"code":"1"}`
		}
		if resp, m := call(t, srv, other, c[0], "/v1/sandboxes/"+id+c[1], body); resp.StatusCode != 404 || m["code"] != "not_found" {
			t.Errorf("another org's %s %s: %d %v", c[0], c[1], resp.StatusCode, m)
		}
	}
	if after := len(fake.seen()); after != before {
		t.Errorf("another org's calls reached the sandbox (%d → %d)", before, after)
	}
}

// TestRunCodeSendsTheIDFirst: the execution's ID reaches the client with
// the headers, before any event (a cell waiting behind another sends none
// for as long as it waits), so another client can DELETE it meanwhile.
func TestRunCodeSendsTheIDFirst(t *testing.T) {
	fake := &fakeCodeServer{hold: make(chan struct{})}
	srv := serveCode(t, fake)
	id := running(t, srv, controlplane.CodeInterpreterTemplate)
	released := false
	defer func() {
		if !released {
			close(fake.hold)
		}
	}()
	got := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/sandboxes/"+id+"/code", strings.NewReader(`{"code":"1","context_id":"ctx_hold"}`))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- resp
	}()
	select {
	case resp := <-got:
		if resp == nil {
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Execution-Id") != "exec_held" {
			t.Errorf("headers %d %v", resp.StatusCode, resp.Header)
		}
		close(fake.hold)
		released = true
		if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), `"type":"end"`) {
			t.Errorf("events %s", b)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the headers waited for the first event")
	}
}

// TestRunCodeWithoutServerIs503: a sandbox whose template runs no code
// interpreter answers 503 code_interpreter_unavailable at once.
func TestRunCodeWithoutServerIs503(t *testing.T) {
	srv := serveCode(t, nil)
	id := running(t, srv, "busybox")
	for _, c := range [][3]string{
		{"POST", "/code", `{"code":"1"}`},
		{"GET", "/code/contexts", ""},
		{"DELETE", "/code/executions/exec_1", ""},
	} {
		resp, m := call(t, srv, "tok", c[0], "/v1/sandboxes/"+id+c[1], c[2])
		if resp.StatusCode != 503 || m["code"] != "code_interpreter_unavailable" || !strings.Contains(fmt.Sprint(m["error"]), "code-interpreter") {
			t.Errorf("%s %s: %d %v", c[0], c[1], resp.StatusCode, m)
		}
	}
}

// TestCollectCode folds events into the ?stream=false document and
// refuses a line that is not JSON.
func TestCollectCode(t *testing.T) {
	doc, err := collectCode(strings.NewReader(""))
	if e, _ := doc["error"].(codeEvent); err != nil || doc["stdout"] != "" || len(doc["events"].([]codeEvent)) != 2 || len(doc["results"].([]codeEvent)) != 0 ||
		e["name"] != "CodeInterpreterLost" || doc["status"] != "error" {
		t.Errorf("an answer without its end: %v %v", doc, err)
	}
	doc, err = collectCode(strings.NewReader(`{"type":"stdout","text":"x"}` + "\n" + `{"type":"result","is_main_result":true,"data":{}}` + "\n" +
		`{"type":"kernel_restarted","reason":"r"}` + "\n" + `{"type":"end","execution_id":"exec_1","status":"ok"}` + "\n"))
	if err != nil || doc["stdout"] != "x" || len(doc["results"].([]codeEvent)) != 1 || len(doc["events"].([]codeEvent)) != 4 ||
		doc["execution_id"] != "exec_1" || doc["status"] != "ok" {
		t.Errorf("document %v %v", doc, err)
	}
	if _, err := collectCode(strings.NewReader("{not json\n")); err == nil {
		t.Error("a broken line was folded")
	}
}

// TestRunCodeCutAnswerEndsWithAnError: when the sandbox's server goes away
// mid-cell, the client gets what came, then an error saying so and an
// end, in both forms, never a clean-looking answer missing its events.
func TestRunCodeCutAnswerEndsWithAnError(t *testing.T) {
	srv := serveCode(t, &fakeCodeServer{})
	id := running(t, srv, controlplane.CodeInterpreterTemplate)
	resp := send(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/code", `{"code":"x","context_id":"ctx_cut"}`)
	defer resp.Body.Close()
	var got []string
	evs, err := readNDJSON(t, resp.Body)
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%v/%v/%v/%v", ev["type"], ev["name"], ev["status"], ev["execution_id"]))
	}
	if err != nil || resp.StatusCode != 200 ||
		strings.Join(got, ",") != "stdout/<nil>/<nil>/<nil>,error/CodeInterpreterLost/<nil>/<nil>,end/<nil>/error/exec_cut" {
		t.Errorf("stream: %d %q %v", resp.StatusCode, got, err)
	}

	r, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/code?stream=false", `{"code":"x","context_id":"ctx_cut"}`)
	e, _ := m["error"].(map[string]any)
	if r.StatusCode != 200 || m["stdout"] != "partial\n" || m["status"] != "error" || e["name"] != "CodeInterpreterLost" {
		t.Errorf("document: %d %v", r.StatusCode, m)
	}
}
