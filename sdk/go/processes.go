package platinum

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// ProcessesService manages a sandbox's background processes: commands
// that outlive the call that started them, with output to attach to,
// stdin, signals and terminals. Get it from SandboxHandle.Processes.
type ProcessesService struct {
	c  *Client
	id string
}

// Processes returns the sandbox's processes API.
func (h *SandboxHandle) Processes() *ProcessesService {
	return &ProcessesService{c: h.s.c, id: h.id}
}

// ProcessStartRequest is a background process to start. Set exactly one
// of Cmd (an argv, run without a shell) or Shell (run with /bin/sh -c).
type ProcessStartRequest struct {
	Cmd   []string
	Shell string
	// Env adds to (and overrides) the sandbox's environment for this
	// process only.
	Env map[string]string
	// Cwd is the working directory; empty means the sandbox's default.
	Cwd string
	// Tag is a label of your choosing, returned by List.
	Tag string
	// Stdin keeps the process's stdin open for SendInput; otherwise it
	// reads /dev/null. A PTY process always takes input.
	Stdin bool
	// PTY, when set, runs the process on a terminal of that size; its
	// output (stdout and stderr merged) goes to Stdout.
	PTY *PTYSize
	// Timeout kills the process this long after it starts, attached or
	// not (ProcessExit.TimedOut is then true); zero means no limit.
	Timeout time.Duration
	// Stdout and Stderr receive the output as the process produces it.
	// When both are nil, Start only starts the process (it runs
	// detached; ProcessHandle.Wait attaches to it).
	Stdout, Stderr io.Writer
}

// PTYSize is a terminal size in character cells.
type PTYSize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// Process describes a running process.
type Process struct {
	PID int `json:"pid"`
	// Tag is empty when the process has none.
	Tag string `json:"tag"`
	// Cmd is the argv as run (Shell appears as ["/bin/sh","-c",s]).
	Cmd []string `json:"cmd"`
	// Cwd is the directory it was started in.
	Cwd string `json:"cwd"`
	// PTY is true for a process on a terminal.
	PTY bool `json:"pty"`
	// Stdin is true when it takes input.
	Stdin bool `json:"stdin"`
}

// ProcessExit is how a process ended. ExitCode is -1 when a signal ended
// it, which includes being killed for running past its Timeout.
type ProcessExit struct {
	ExitCode int
	TimedOut bool
}

type processBody struct {
	Cmd       any               `json:"cmd"`
	Env       map[string]string `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	Tag       string            `json:"tag,omitempty"`
	Stdin     bool              `json:"stdin,omitempty"`
	PTY       *PTYSize          `json:"pty,omitempty"`
	TimeoutMS int64             `json:"timeout_ms,omitempty"`
}

func (r ProcessStartRequest) body() (processBody, error) {
	cmd, err := ExecRequest{Cmd: r.Cmd, Shell: r.Shell, Timeout: r.Timeout}.body()
	if err != nil {
		return processBody{}, err
	}
	return processBody{Cmd: cmd.Cmd, Env: r.Env, Cwd: r.Cwd, Tag: r.Tag, Stdin: r.Stdin, PTY: r.PTY, TimeoutMS: cmd.TimeoutMS}, nil
}

func (p *ProcessesService) path(pid int, op string) string {
	s := "/v1/sandboxes/" + url.PathEscape(p.id) + "/processes"
	if pid != 0 {
		s += "/" + strconv.Itoa(pid)
	}
	if op != "" {
		s += "/" + op
	}
	return s
}

// Start starts a process in the running sandbox. With req.Stdout or
// req.Stderr set, the handle is attached: the output is written there as
// it comes (by a goroutine of the handle, until the process ends, ctx is
// done, or Close), and Wait returns the exit. Detaching never stops the
// process. A sandbox that is not running gives an APIError with code
// sandbox_not_ready.
func (p *ProcessesService) Start(ctx context.Context, req ProcessStartRequest) (*ProcessHandle, error) {
	b, err := req.body()
	if err != nil {
		return nil, fmt.Errorf("start process in sandbox %s: %w", p.id, err)
	}
	if req.Stdout == nil && req.Stderr == nil {
		var proc Process
		if _, err := p.c.doJSON(ctx, "POST", p.path(0, ""), nil, b, &proc); err != nil {
			return nil, fmt.Errorf("start process in sandbox %s: %w", p.id, err)
		}
		return &ProcessHandle{p: p, pid: proc.PID}, nil
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("start process in sandbox %s: encode request: %w", p.id, err)
	}
	h, err := p.attach(ctx, "POST", p.path(0, ""), url.Values{"stream": {"true"}}, raw, req.Stdout, req.Stderr)
	if err != nil {
		return nil, fmt.Errorf("start process in sandbox %s: %w", p.id, err)
	}
	return h, nil
}

// Connect attaches to a running process's output from now on (earlier
// output is not replayed), writing it to stdout and stderr (nil
// discards); Wait returns its exit. An unknown pid gives an APIError with
// code not_found.
func (p *ProcessesService) Connect(ctx context.Context, pid int, stdout, stderr io.Writer) (*ProcessHandle, error) {
	h, err := p.attach(ctx, "GET", p.path(pid, "stream"), nil, nil, stdout, stderr)
	if err != nil {
		return nil, fmt.Errorf("connect to process %d in sandbox %s: %w", pid, p.id, err)
	}
	return h, nil
}

// List returns the sandbox's running processes, by pid.
func (p *ProcessesService) List(ctx context.Context) ([]Process, error) {
	procs, err := fetchField[[]Process](ctx, p.c, "GET", p.path(0, ""), nil, nil, "processes", "list processes of sandbox %s", p.id)
	for i := range procs {
		if procs[i].Cmd == nil {
			procs[i].Cmd = []string{}
		}
	}
	return procs, err
}

// SendInput writes data to the process's stdin (or its terminal). A
// process started without Stdin and without a PTY gives an APIError with
// code conflict.
func (p *ProcessesService) SendInput(ctx context.Context, pid int, data []byte) error {
	body := map[string]any{"data_b64": base64.StdEncoding.EncodeToString(data)}
	return callJSON(ctx, p.c, "POST", p.path(pid, "input"), nil, body, "input to process %d in sandbox %s", pid, p.id)
}

// CloseStdin ends the process's input: EOF on its stdin, or Ctrl-D typed
// on its terminal.
func (p *ProcessesService) CloseStdin(ctx context.Context, pid int) error {
	return callJSON(ctx, p.c, "POST", p.path(pid, "input"), nil, map[string]any{"eof": true}, "close stdin of process %d in sandbox %s", pid, p.id)
}

// Signal sends a signal ("SIGTERM", "SIGINT", "SIGHUP", "SIGKILL", ...;
// see the API's ProcessSignal) to the process's process group. An
// unknown name gives an APIError with code invalid_request and field
// signal.
func (p *ProcessesService) Signal(ctx context.Context, pid int, signal string) error {
	return callJSON(ctx, p.c, "POST", p.path(pid, "signal"), nil, map[string]any{"signal": signal}, "signal process %d in sandbox %s", pid, p.id)
}

// Resize sets a PTY process's terminal size. A process without a PTY
// gives an APIError with code conflict.
func (p *ProcessesService) Resize(ctx context.Context, pid int, size PTYSize) error {
	return callJSON(ctx, p.c, "POST", p.path(pid, "resize"), nil, size, "resize process %d in sandbox %s", pid, p.id)
}

// Kill ends the process and its process group with SIGKILL.
func (p *ProcessesService) Kill(ctx context.Context, pid int) error {
	return callJSON(ctx, p.c, "DELETE", p.path(pid, ""), nil, nil, "kill process %d in sandbox %s", pid, p.id)
}

// ProcessHandle is one process, attached to its output or not. Its
// methods are safe for concurrent use.
type ProcessHandle struct {
	p   *ProcessesService
	pid int

	// Set when attached: the pump goroutine's result and its stop.
	cancel context.CancelFunc
	done   chan struct{}
	exit   *ProcessExit
	err    error
	once   sync.Once
}

// attach opens an NDJSON process stream, reads its start event and pumps
// the rest to stdout and stderr in a goroutine.
func (p *ProcessesService) attach(ctx context.Context, method, path string, q url.Values, body []byte, stdout, stderr io.Writer) (*ProcessHandle, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	sctx, cancel := context.WithCancel(ctx)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := p.c.newRequest(sctx, method, path, q, rd)
	if err != nil {
		cancel()
		return nil, err
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set("Accept", "application/x-ndjson")
	resp, err := p.c.send(hreq)
	if err != nil {
		cancel()
		return nil, err
	}
	dec := json.NewDecoder(resp.Body)
	first, err := nextProcessEvent(sctx, dec, resp.StatusCode)
	if err == nil && (first.Type != "start" || first.PID <= 0) {
		err = fmt.Errorf("%w: first event is %q, not start", ErrStreamEnded, first.Type)
	}
	if err != nil {
		resp.Body.Close()
		cancel()
		return nil, err
	}
	h := &ProcessHandle{p: p, pid: first.PID, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		defer resp.Body.Close()
		h.exit, h.err = pumpProcess(sctx, dec, resp.StatusCode, stdout, stderr)
	}()
	return h, nil
}

// processEvent is one line of a process stream (an ExecEvent).
type processEvent struct {
	execEvent
	DataB64 string `json:"data_b64"`
	raw     json.RawMessage
}

func nextProcessEvent(ctx context.Context, dec *json.Decoder, status int) (processEvent, error) {
	var ev processEvent
	if err := dec.Decode(&ev.raw); err != nil {
		if ctx.Err() != nil {
			return ev, ctx.Err()
		}
		if errors.Is(err, io.EOF) {
			return ev, ErrStreamEnded
		}
		return ev, fmt.Errorf("%w: %w", ErrStreamEnded, err)
	}
	if err := json.Unmarshal(ev.raw, &ev); err != nil {
		return ev, fmt.Errorf("decode stream event: %w", err)
	}
	if ev.Type == "error" {
		var body map[string]any
		_ = json.Unmarshal(ev.raw, &body)
		code := ev.Code
		if code == "" {
			code = CodeInternal
		}
		return ev, &APIError{StatusCode: status, Code: code, Message: ev.Error, Body: body}
	}
	return ev, nil
}

func pumpProcess(ctx context.Context, dec *json.Decoder, status int, stdout, stderr io.Writer) (*ProcessExit, error) {
	for {
		ev, err := nextProcessEvent(ctx, dec, status)
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case "stdout":
			_, err = io.WriteString(stdout, ev.Data)
		case "stderr":
			_, err = io.WriteString(stderr, ev.Data)
		case "pty":
			var b []byte
			if b, err = base64.StdEncoding.DecodeString(ev.DataB64); err == nil {
				_, err = stdout.Write(b)
			}
		case "exit":
			return &ProcessExit{ExitCode: ev.ExitCode, TimedOut: ev.TimedOut}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("write %s output: %w", ev.Type, err)
		}
	}
}

// PID is the process's pid inside the sandbox.
func (h *ProcessHandle) PID() int { return h.pid }

// Wait returns the process's exit once it ends. An attached handle
// returns what its stream reported (an error if the stream broke, was
// closed, or a writer failed); a detached one attaches first, discarding
// the output. ctx bounds only this wait.
func (h *ProcessHandle) Wait(ctx context.Context) (*ProcessExit, error) {
	if h.done == nil {
		a, err := h.p.Connect(ctx, h.pid, nil, nil)
		if err != nil {
			return nil, err
		}
		defer a.Close()
		return a.Wait(ctx)
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for process %d: %w", h.pid, ctx.Err())
	}
	if h.err != nil {
		return nil, fmt.Errorf("process %d stream: %w", h.pid, h.err)
	}
	return h.exit, nil
}

// Close detaches from the output; the process keeps running. It waits
// for the output goroutine to stop, so no write follows it.
func (h *ProcessHandle) Close() error {
	if h.done == nil {
		return nil
	}
	h.once.Do(h.cancel)
	<-h.done
	return nil
}

// SendInput writes data to the process's stdin or terminal.
func (h *ProcessHandle) SendInput(ctx context.Context, data []byte) error {
	return h.p.SendInput(ctx, h.pid, data)
}

// CloseStdin ends the process's input.
func (h *ProcessHandle) CloseStdin(ctx context.Context) error { return h.p.CloseStdin(ctx, h.pid) }

// Signal sends a signal by name ("SIGTERM", ...) to the process's group.
func (h *ProcessHandle) Signal(ctx context.Context, signal string) error {
	return h.p.Signal(ctx, h.pid, signal)
}

// Resize sets the process's terminal size.
func (h *ProcessHandle) Resize(ctx context.Context, size PTYSize) error {
	return h.p.Resize(ctx, h.pid, size)
}

// Kill ends the process with SIGKILL.
func (h *ProcessHandle) Kill(ctx context.Context) error { return h.p.Kill(ctx, h.pid) }
