package platinum_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// codeFake answers the code routes: POST …/code streams lines (the
// handler's events), and records each request's method, path and body.
type codeFake struct {
	mu     sync.Mutex
	calls  []string
	lines  []string
	header http.Header
	status int // non-zero: answer this with an Error body instead
	hold   chan struct{}
}

func (f *codeFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path+" "+string(b))
	f.mu.Unlock()
	if f.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		fmt.Fprintf(w, `{"code":"not_found","error":"context ctx_nope not found"}`)
		return
	}
	switch {
	case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/code"):
		for k, v := range f.header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(200)
		for _, l := range f.lines {
			fmt.Fprintln(w, l)
			w.(http.Flusher).Flush()
		}
		if f.hold != nil {
			select {
			case <-f.hold:
			case <-r.Context().Done():
			}
		}
	case r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/code/executions"):
		fmt.Fprint(w, `{"executions":[{"id":"exec_1","context_id":"ctx_default_python","language":"python","state":"running","started_at":"2026-01-02T03:04:05.000006Z"}]}`)
	case r.Method == "DELETE" && strings.HasSuffix(r.URL.Path, "/code/executions/exec_1"):
		w.WriteHeader(204)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		fmt.Fprint(w, `{"code":"not_found","error":"no such execution"}`)
	}
}

func (f *codeFake) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func newCodeFake(t *testing.T, f *codeFake) *platinum.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return platinum.New(srv.URL, "tok")
}

var pngBytes = []byte("\x89PNG\r\n\x1a\nrest")

// TestRunCodeFoldsAndCallsBack: every event reaches its callback in order
// while the stream runs, and the Execution sums them.
func TestRunCodeFoldsAndCallsBack(t *testing.T) {
	f := &codeFake{header: http.Header{"X-Execution-Id": {"exec_1"}}, lines: []string{
		`{"type":"kernel_restarted","reason":"the kernel died"}`,
		`{"type":"stdout","text":"a\n"}`,
		`{"type":"stderr","text":"warn\n"}`,
		`{"type":"result","is_main_result":false,"data":{"image/png":"` + base64.StdEncoding.EncodeToString(pngBytes) + `","image/svg+xml":"<svg/>","text/markdown":"# h","application/json":{"k":[1,2]}}}`,
		`{"type":"stdout","text":"b\n"}`,
		`{"type":"result","is_main_result":true,"data":{"text/plain":"42","text/html":"<b>42</b>"}}`,
		`{"type":"error","name":"ValueError","value":"no","traceback":"Traceback…"}`,
		`{"type":"end","execution_id":"exec_1","context_id":"ctx_default_python","execution_count":7,"status":"error","duration_ms":12.5}`,
		`{"type":"stdout","text":"after the end: never read"}`,
	}}
	c := newCodeFake(t, f)
	var got []string
	ex, err := c.Sandboxes.RunCode(context.Background(), "sbx_1", platinum.RunCodeRequest{
		Code: "x", Language: "typescript", ContextID: "ctx_1", Env: map[string]string{"K": "v"}, Cwd: "/tmp",
		Timeout:  1500 * time.Microsecond,
		OnStart:  func(id string) { got = append(got, "start "+id) },
		OnStdout: func(s string) { got = append(got, "stdout "+s) },
		OnStderr: func(s string) { got = append(got, "stderr "+s) },
		OnResult: func(r platinum.CodeResult) { got = append(got, fmt.Sprintf("result %v", r.IsMainResult)) },
		OnError:  func(e *platinum.CodeError) { got = append(got, "error "+e.Error()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start exec_1", "stdout a\n", "stderr warn\n", "result false", "stdout b\n", "result true", "error ValueError: no"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("callbacks\n got %q\nwant %q", got, want)
	}
	if ex.ID != "exec_1" || ex.Stdout != "a\nb\n" || ex.Stderr != "warn\n" || ex.Text() != "42" || len(ex.Results) != 2 ||
		ex.ContextID != "ctx_default_python" || ex.ExecutionCount != 7 || ex.Status != "error" ||
		ex.Duration != 12500*time.Microsecond || ex.KernelRestarted != "the kernel died" ||
		ex.Error == nil || ex.Error.Traceback != "Traceback…" {
		t.Errorf("execution %+v", ex)
	}
	r := ex.Results[0]
	if string(r.PNG()) != string(pngBytes) || r.SVG() != "<svg/>" || r.Markdown() != "# h" || r.Text() != "" ||
		!reflect.DeepEqual(r.JSON(), map[string]any{"k": []any{1.0, 2.0}}) || r.Binary("image/jpeg") != nil {
		t.Errorf("display result %+v", r)
	}
	if ex.Results[1].HTML() != "<b>42</b>" {
		t.Errorf("main result %+v", ex.Results[1])
	}
	var body map[string]any
	calls := f.seen()
	if len(calls) != 1 || !strings.HasPrefix(calls[0], "POST /v1/sandboxes/sbx_1/code ") {
		t.Fatalf("calls %q", calls)
	}
	json.Unmarshal([]byte(strings.SplitN(calls[0], " ", 3)[2]), &body)
	wantBody := map[string]any{"code": "x", "language": "typescript", "context_id": "ctx_1", "env": map[string]any{"K": "v"},
		"cwd": "/tmp", "timeout_ms": 2.0}
	if !reflect.DeepEqual(body, wantBody) {
		t.Errorf("request body %v, want %v", body, wantBody)
	}
}

// TestRunCodeStreamEnds: a stream that closes before its end event, or
// breaks, is ErrCodeStreamEnded; the cell's own error is never RunCode's.
func TestRunCodeStreamEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
	}{
		{"closed before end", []string{`{"type":"stdout","text":"a"}`}},
		{"empty", nil},
		{"broken line", []string{`{"type":"stdout",`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCodeFake(t, &codeFake{lines: tc.lines})
			ex, err := c.Sandboxes.RunCode(context.Background(), "sbx_1", platinum.RunCodeRequest{Code: "1"})
			if !errors.Is(err, platinum.ErrCodeStreamEnded) || ex != nil {
				t.Errorf("got %+v, %v; want ErrCodeStreamEnded", ex, err)
			}
		})
	}
	c := newCodeFake(t, &codeFake{lines: []string{`{"type":"error","name":"ZeroDivisionError","value":"division by zero"}`, `{"type":"end","status":"error"}`}})
	if ex, err := c.Sandboxes.RunCode(context.Background(), "sbx_1", platinum.RunCodeRequest{Code: "1/0"}); err != nil || ex.Error.Name != "ZeroDivisionError" {
		t.Errorf("a cell's error: %+v %v", ex, err)
	}
}

// TestRunCodeRefusals: a refused call is an *APIError; a negative timeout
// never leaves the client; cancelling ctx returns its error.
func TestRunCodeRefusals(t *testing.T) {
	f := &codeFake{status: 404}
	c := newCodeFake(t, f)
	_, err := c.Sandboxes.RunCode(context.Background(), "sbx_1", platinum.RunCodeRequest{Code: "1", ContextID: "ctx_nope"})
	var ae *platinum.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Code != "not_found" {
		t.Errorf("404: %v", err)
	}
	f.calls = nil
	if _, err := c.Sandboxes.RunCode(context.Background(), "sbx_1", platinum.RunCodeRequest{Code: "1", Timeout: -time.Second}); err == nil || len(f.seen()) != 0 {
		t.Errorf("negative timeout: %v, calls %q", err, f.seen())
	}

	hold := &codeFake{lines: []string{`{"type":"stdout","text":"started"}`}, hold: make(chan struct{})}
	defer close(hold.hold)
	c = newCodeFake(t, hold)
	ctx, cancel := context.WithCancel(context.Background())
	_, err = c.Sandboxes.RunCode(ctx, "sbx_1", platinum.RunCodeRequest{Code: "while True: pass", OnStdout: func(string) { cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestCodeExecutions: ListCodeExecutions and StopCodeExecution call their
// routes; stopping an ended execution is a 404 *APIError.
func TestCodeExecutions(t *testing.T) {
	f := &codeFake{}
	c := newCodeFake(t, f)
	ctx := context.Background()
	list, err := c.Sandboxes.ListCodeExecutions(ctx, "sbx_1")
	if err != nil || len(list) != 1 || list[0].ID != "exec_1" || list[0].Language != "python" ||
		!list[0].StartedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)) {
		t.Errorf("list: %+v %v", list, err)
	}
	if err := c.Sandboxes.StopCodeExecution(ctx, "sbx_1", "exec_1"); err != nil {
		t.Errorf("stop: %v", err)
	}
	var ae *platinum.APIError
	if err := c.Sandboxes.StopCodeExecution(ctx, "sbx_1", "exec_gone"); !errors.As(err, &ae) || ae.StatusCode != 404 {
		t.Errorf("stop of an ended execution: %v", err)
	}
	want := []string{"GET /v1/sandboxes/sbx_1/code/executions ", "DELETE /v1/sandboxes/sbx_1/code/executions/exec_1 ", "DELETE /v1/sandboxes/sbx_1/code/executions/exec_gone "}
	if got := f.seen(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls %q", got)
	}
}
