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
)

func TestExec(t *testing.T) {
	_, c, id := withSandbox(t)
	tests := []struct {
		name string
		req  platinum.ExecRequest
		want platinum.ExecResult
	}{
		{
			name: "argv",
			req:  platinum.ExecRequest{Cmd: []string{"echo", "hello", "world"}},
			want: platinum.ExecResult{Stdout: "hello world\n"},
		},
		{
			name: "shell string",
			req:  platinum.ExecRequest{Shell: "echo hi"},
			want: platinum.ExecResult{Stdout: "hi\n"},
		},
		{
			name: "env and cwd",
			req:  platinum.ExecRequest{Shell: `printf '%s %s\n' "$FOO" "$PWD"`, Env: map[string]string{"FOO": "bar"}, Cwd: "/tmp", Timeout: 10 * time.Second},
			want: platinum.ExecResult{Stdout: "bar /tmp\n"},
		},
		{
			name: "stdin",
			req:  platinum.ExecRequest{Cmd: []string{"cat"}, Stdin: "fed in"},
			want: platinum.ExecResult{Stdout: "fed in"},
		},
		{
			name: "non-zero exit is not an error",
			req:  platinum.ExecRequest{Shell: "echo oops >&2; exit 7"},
			want: platinum.ExecResult{ExitCode: 7, Stderr: "oops\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Sandboxes.Exec(t.Context(), id, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got.Duration <= 0 {
				t.Errorf("Duration = %v, want the time the command ran", got.Duration)
			}
			got.Duration = 0
			if *got != tt.want {
				t.Errorf("Exec = %+v, want %+v", *got, tt.want)
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
	_, c := newServer(t)
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
		name        string
		req         platinum.ExecRequest
		stop        bool // stop the sandbox once the output starts
		wantStdout  string
		wantStderr  string
		wantResult  *platinum.ExecResult
		wantErrCode string
	}{
		{
			name:       "both streams and the exit code",
			req:        platinum.ExecRequest{Shell: `printf a; printf E1 >&2; printf 'b\n'; printf 'E2\n' >&2; exit 3`},
			wantStdout: "ab\n", wantStderr: "E1E2\n",
			wantResult: &platinum.ExecResult{ExitCode: 3},
		},
		{
			name:       "timed out",
			req:        platinum.ExecRequest{Shell: "printf partial; sleep 30", Timeout: 300 * time.Millisecond},
			wantStdout: "partial",
			wantResult: &platinum.ExecResult{ExitCode: -1, TimedOut: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c, id := withSandbox(t)
			var stdout, stderr bytes.Buffer
			res, err := c.Sandboxes.ExecStream(t.Context(), id, tt.req, &stdout, &stderr)
			if stdout.String() != tt.wantStdout || stderr.String() != tt.wantStderr {
				t.Errorf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tt.wantStdout, tt.wantStderr)
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
		{"error event", "application/x-ndjson", `{"type":"stdout","data":"x"}` + "\n" + `{"type":"error","code":"unavailable","error":"agent went away"}` + "\n", "x", "", 0,
			&platinum.APIError{StatusCode: 200, Code: platinum.CodeUnavailable, Message: "agent went away"}},
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
			var wantAE, ae *platinum.APIError
			if errors.As(tt.wantErr, &wantAE) {
				if !errors.As(err, &ae) || ae.Code != wantAE.Code || ae.Message != wantAE.Message {
					t.Errorf("err = %v, want APIError %s %q", err, wantAE.Code, wantAE.Message)
				}
				return
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
