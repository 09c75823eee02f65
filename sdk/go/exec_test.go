package platinum_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

func TestExec(t *testing.T) {
	srv, c := newFake(t)
	id := srv.AddSandbox(platinumtest.Sandbox{})
	tests := []struct {
		name     string
		req      platinum.ExecRequest
		wantCall platinumtest.ExecCall
		want     platinum.ExecResult
	}{
		{
			name:     "argv",
			req:      platinum.ExecRequest{Cmd: []string{"echo", "hello", "world"}},
			wantCall: platinumtest.ExecCall{Argv: []string{"echo", "hello", "world"}},
			want:     platinum.ExecResult{Stdout: "hello world\n"},
		},
		{
			name:     "shell string",
			req:      platinum.ExecRequest{Shell: "echo hi"},
			wantCall: platinumtest.ExecCall{Shell: "echo hi"},
			want:     platinum.ExecResult{Stdout: "hi\n"},
		},
		{
			name:     "env cwd timeout",
			req:      platinum.ExecRequest{Cmd: []string{"printenv", "FOO"}, Env: map[string]string{"FOO": "bar"}, Cwd: "/tmp", Timeout: 1500 * time.Microsecond},
			wantCall: platinumtest.ExecCall{Argv: []string{"printenv", "FOO"}, Env: map[string]string{"FOO": "bar"}, Cwd: "/tmp", TimeoutMS: 2},
			want:     platinum.ExecResult{Stdout: "bar\n"},
		},
		{
			name:     "stdin",
			req:      platinum.ExecRequest{Cmd: []string{"cat"}, Stdin: "fed in"},
			wantCall: platinumtest.ExecCall{Argv: []string{"cat"}, Stdin: "fed in"},
			want:     platinum.ExecResult{Stdout: "fed in"},
		},
		{
			name:     "non-zero exit is not an error",
			req:      platinum.ExecRequest{Cmd: []string{"nosuch"}},
			wantCall: platinumtest.ExecCall{Argv: []string{"nosuch"}},
			want:     platinum.ExecResult{ExitCode: 127, Stderr: "sh: nosuch: not found\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.wantCall.SandboxID = id
			n := len(srv.Execs())
			got, err := c.Sandboxes.Exec(t.Context(), id, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Duration = 7 * time.Millisecond // what the fake reports
			if *got != want {
				t.Errorf("Exec = %+v, want %+v", *got, want)
			}
			if call := srv.Execs()[n]; !reflect.DeepEqual(call, tt.wantCall) {
				t.Errorf("server got %+v, want %+v", call, tt.wantCall)
			}

			var stdout, stderr bytes.Buffer
			sres, err := c.Sandboxes.ExecStream(t.Context(), id, tt.req, &stdout, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			if stdout.String() != tt.want.Stdout || stderr.String() != tt.want.Stderr {
				t.Errorf("streamed stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tt.want.Stdout, tt.want.Stderr)
			}
			if *sres != (platinum.ExecResult{ExitCode: tt.want.ExitCode}) {
				t.Errorf("ExecStream = %+v, want only exit code %d", *sres, tt.want.ExitCode)
			}
		})
	}
}

func TestExecBadRequest(t *testing.T) {
	_, c := newFake(t)
	for _, req := range []platinum.ExecRequest{
		{},
		{Cmd: []string{"ls"}, Shell: "ls"},
		{Cmd: []string{"ls"}, Timeout: -time.Second},
	} {
		if _, err := c.Sandboxes.Exec(t.Context(), "sbx_x", req); err == nil {
			t.Errorf("Exec(%+v) succeeded, want an error", req)
		}
		if _, err := c.Sandboxes.ExecStream(t.Context(), "sbx_x", req, nil, nil); err == nil {
			t.Errorf("ExecStream(%+v) succeeded, want an error", req)
		}
	}
}

func TestExecStream(t *testing.T) {
	tests := []struct {
		name         string
		outcome      platinumtest.ExecOutcome
		wantStdout   string
		wantStderr   string
		wantResult   *platinum.ExecResult
		wantErrCode  string
		wantBuffered platinum.ExecResult
	}{
		{
			name: "interleaved output in order",
			outcome: platinumtest.ExecOutcome{Output: []platinumtest.Chunk{
				{Stream: "stdout", Data: "a"}, {Stream: "stderr", Data: "E1"}, {Stream: "stdout", Data: "b\n"}, {Stream: "stderr", Data: "E2\n"},
			}, ExitCode: 3},
			wantStdout: "ab\n", wantStderr: "E1E2\n",
			wantResult: &platinum.ExecResult{ExitCode: 3},
		},
		{
			name:       "timed out",
			outcome:    platinumtest.ExecOutcome{Output: []platinumtest.Chunk{{Stream: "stdout", Data: "partial"}}, ExitCode: -1, TimedOut: true},
			wantStdout: "partial",
			wantResult: &platinum.ExecResult{ExitCode: -1, TimedOut: true},
		},
		{
			name:        "error event",
			outcome:     platinumtest.ExecOutcome{Output: []platinumtest.Chunk{{Stream: "stdout", Data: "x"}}, ErrorCode: "unavailable", ErrorMsg: "agent went away"},
			wantStdout:  "x",
			wantErrCode: "unavailable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, c := newFake(t)
			srv.Exec = func(platinumtest.ExecCall) platinumtest.ExecOutcome { return tt.outcome }
			id := srv.AddSandbox(platinumtest.Sandbox{})
			var stdout, stderr bytes.Buffer
			res, err := c.Sandboxes.ExecStream(t.Context(), id, platinum.ExecRequest{Shell: "x"}, &stdout, &stderr)
			if stdout.String() != tt.wantStdout || stderr.String() != tt.wantStderr {
				t.Errorf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tt.wantStdout, tt.wantStderr)
			}
			if tt.wantErrCode != "" {
				var ae *platinum.APIError
				if !errors.As(err, &ae) || ae.Code != tt.wantErrCode || ae.Message != tt.outcome.ErrorMsg {
					t.Fatalf("err = %v, want APIError %s", err, tt.wantErrCode)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(res, tt.wantResult) {
				t.Errorf("ExecStream = %+v, %v; want %+v", res, err, tt.wantResult)
			}
		})
	}
}

// rawServer serves one canned answer to every request.
func rawServer(t *testing.T, status int, contentType, body string) *platinum.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return platinum.New(srv.URL, "t")
}

func TestExecStreamWire(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		wantStdout  string
		wantStderr  string
		wantExit    int
		wantErr     error
	}{
		{"ended without exit", "application/x-ndjson", `{"type":"start","pid":1}` + "\n" + `{"type":"stdout","data":"a"}` + "\n", "a", "", 0, platinum.ErrStreamEnded},
		{"cut mid-line", "application/x-ndjson", `{"type":"stdout","data":"a"}` + "\n" + `{"type":"std`, "a", "", 0, platinum.ErrStreamEnded},
		{"unknown event types are skipped", "application/x-ndjson", `{"type":"start","pid":1}` + "\n" + `{"type":"resize","cols":80}` + "\n" + `{"type":"exit","exit_code":4,"timed_out":false}` + "\n", "", "", 4, nil},
		{"server that does not stream", "application/json", `{"exit_code":2,"stdout":"o","stderr":"e","timed_out":false,"duration_ms":1}`, "o", "e", 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rawServer(t, 200, tt.contentType, tt.body)
			var stdout, stderr bytes.Buffer
			res, err := c.Sandboxes.ExecStream(t.Context(), "sbx_1", platinum.ExecRequest{Shell: "x"}, &stdout, &stderr)
			if stdout.String() != tt.wantStdout || stderr.String() != tt.wantStderr {
				t.Errorf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tt.wantStdout, tt.wantStderr)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || res.ExitCode != tt.wantExit || res.Stdout != "" {
				t.Errorf("ExecStream = %+v, %v; want exit %d", res, err, tt.wantExit)
			}
		})
	}
}

func TestNonJSONErrors(t *testing.T) {
	tests := []struct {
		status   int
		body     string
		wantCode string
		wantMsg  string
	}{
		{502, "<html>bad gateway</html>", platinum.CodeInternal, "<html>bad gateway</html>"},
		{404, "", platinum.CodeNotFound, "not found"},
		{503, `{"code":"unavailable","error":"draining","retry_after":5}`, platinum.CodeUnavailable, "draining"},
		{418, "", "http_418", "i'm a teapot"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			c := rawServer(t, tt.status, "text/html", tt.body)
			_, err := c.Sandboxes.Get(t.Context(), "sbx_1")
			var ae *platinum.APIError
			if !errors.As(err, &ae) || ae.StatusCode != tt.status || ae.Code != tt.wantCode || ae.Message != tt.wantMsg {
				t.Errorf("err = %#v, want %d %s %q", ae, tt.status, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestConnectionError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := platinum.New(url, "t").Sandboxes.Get(t.Context(), "sbx_1")
	var ae *platinum.APIError
	if err == nil || errors.As(err, &ae) || !strings.Contains(err.Error(), "GET /v1/sandboxes/sbx_1") {
		t.Errorf("err = %v, want a transport error naming the call", err)
	}
}
