package platinum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"time"
)

// ErrStreamEnded is returned (wrapped) by ExecStream when the stream closed
// before the command's exit was reported, e.g. because ptd restarted. The
// command may still be running or may have finished; its exit is unknown.
var ErrStreamEnded = errors.New("exec stream ended without an exit event")

// ExecRequest is a command to run in a sandbox. Set exactly one of Cmd (an
// argv, run without a shell) or Shell (a string run with /bin/sh -c).
type ExecRequest struct {
	Cmd   []string
	Shell string
	// Env adds to (and overrides) the sandbox's environment for this
	// command only.
	Env map[string]string
	// Cwd is the working directory; empty means the sandbox's default.
	Cwd string
	// Timeout kills the command after this long (TimedOut is then true);
	// zero means the server's default.
	Timeout time.Duration
	// Stdin is fed to the command's standard input, which is then closed.
	Stdin string
}

// ExecResult is how a command ended. ExitCode is -1 when it was killed by a
// signal, which includes being killed for running past its Timeout.
type ExecResult struct {
	ExitCode int
	// Stdout and Stderr are the command's whole output for Exec; they are
	// empty for ExecStream, which writes the output as it comes instead.
	Stdout   string
	Stderr   string
	TimedOut bool
	// Duration is how long the command ran, as measured in the sandbox;
	// zero for ExecStream.
	Duration time.Duration
}

// execBody is the wire form of ExecRequest: cmd is an array or a string.
type execBody struct {
	Cmd       any               `json:"cmd"`
	Env       map[string]string `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	TimeoutMS int64             `json:"timeout_ms,omitempty"`
	Stdin     string            `json:"stdin,omitempty"`
}

func (r ExecRequest) body() (execBody, error) {
	b := execBody{Env: r.Env, Cwd: r.Cwd, Stdin: r.Stdin}
	switch {
	case len(r.Cmd) > 0 && r.Shell != "":
		return b, errors.New("set Cmd or Shell, not both")
	case len(r.Cmd) > 0:
		b.Cmd = r.Cmd
	case r.Shell != "":
		b.Cmd = r.Shell
	default:
		return b, errors.New("no command: set Cmd or Shell")
	}
	if r.Timeout < 0 {
		return b, errors.New("negative Timeout")
	}
	if r.Timeout > 0 {
		b.TimeoutMS = max(int64((r.Timeout+time.Millisecond-1)/time.Millisecond), 1)
	}
	return b, nil
}

// execResultWire is the wire form of ExecResult.
type execResultWire struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	TimedOut   bool   `json:"timed_out"`
	DurationMS int64  `json:"duration_ms"`
}

func (w execResultWire) result() *ExecResult {
	return &ExecResult{
		ExitCode: w.ExitCode, Stdout: w.Stdout, Stderr: w.Stderr,
		TimedOut: w.TimedOut, Duration: time.Duration(w.DurationMS) * time.Millisecond,
	}
}

// Exec runs a command in a running sandbox, waits for it and returns its
// exit code and whole output. A non-zero exit is not an error. A sandbox that
// is not running gives an APIError with code sandbox_not_ready. For large or
// long-running output use ExecStream.
func (s *SandboxesService) Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error) {
	b, err := req.body()
	if err != nil {
		return nil, fmt.Errorf("exec in sandbox %s: %w", id, err)
	}
	var w execResultWire
	if _, err := s.c.doJSON(ctx, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/exec", nil, b, &w); err != nil {
		return nil, fmt.Errorf("exec in sandbox %s: %w", id, err)
	}
	return w.result(), nil
}

// execEvent is one line of an exec stream.
type execEvent struct {
	Type     string `json:"type"`
	PID      int    `json:"pid"`
	Data     string `json:"data"`
	ExitCode int    `json:"exit_code"`
	TimedOut bool   `json:"timed_out"`
	Code     string `json:"code"`
	Error    string `json:"error"`
}

// ExecStream runs a command like Exec but writes its output to stdout and
// stderr (nil discards) as the sandbox produces it, then returns the exit.
// The result's Stdout and Stderr are empty. If the server reports an error
// in the stream it is returned as an *APIError; if the stream ends without
// an exit, the error wraps ErrStreamEnded. An error writing to stdout or
// stderr stops the call (and closes the stream).
func (s *SandboxesService) ExecStream(ctx context.Context, id string, req ExecRequest, stdout, stderr io.Writer) (*ExecResult, error) {
	res, err := s.execStream(ctx, id, req, stdout, stderr)
	if err != nil {
		return nil, fmt.Errorf("exec in sandbox %s: %w", id, err)
	}
	return res, nil
}

func (s *SandboxesService) execStream(ctx context.Context, id string, req ExecRequest, stdout, stderr io.Writer) (*ExecResult, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	b, err := req.body()
	if err != nil {
		return nil, err
	}
	resp, err := s.c.openJSON(ctx, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/exec", url.Values{"stream": {"true"}}, "", b, "application/x-ndjson", true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()

	// A server that does not stream answers with the buffered result; pass
	// its output on so the caller sees the same thing either way.
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		var w execResultWire
		if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
			return nil, fmt.Errorf("decode response: %w", err)
		}
		if _, err := io.WriteString(stdout, w.Stdout); err != nil {
			return nil, fmt.Errorf("write stdout: %w", err)
		}
		if _, err := io.WriteString(stderr, w.Stderr); err != nil {
			return nil, fmt.Errorf("write stderr: %w", err)
		}
		res := w.result()
		res.Stdout, res.Stderr = "", ""
		return res, nil
	}

	dec := json.NewDecoder(resp.Body)
	for {
		var line json.RawMessage
		if err := dec.Decode(&line); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, ErrStreamEnded
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w: %w", ErrStreamEnded, err)
		}
		var ev execEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("decode stream event: %w", err)
		}
		switch ev.Type {
		case "stdout":
			if _, err := io.WriteString(stdout, ev.Data); err != nil {
				return nil, fmt.Errorf("write stdout: %w", err)
			}
		case "stderr":
			if _, err := io.WriteString(stderr, ev.Data); err != nil {
				return nil, fmt.Errorf("write stderr: %w", err)
			}
		case "exit":
			return &ExecResult{ExitCode: ev.ExitCode, TimedOut: ev.TimedOut}, nil
		case "error":
			var body map[string]any
			_ = json.Unmarshal(line, &body)
			code := ev.Code
			if code == "" {
				code = CodeInternal
			}
			return nil, &APIError{StatusCode: resp.StatusCode, Code: code, Message: ev.Error, Body: body, RequestID: resp.Header.Get(RequestIDHeader)}
		default:
			// "start" and event types added later carry nothing we need.
		}
	}
}
