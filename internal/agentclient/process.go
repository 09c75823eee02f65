package agentclient

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/platinum-dev/platinum/api/gen/process"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// ProcessRequest starts a background process (StartProcess).
type ProcessRequest struct {
	// Cmd is the program; without a slash it is looked up on the child's PATH.
	Cmd  string
	Args []string
	// Env is layered over the agent defaults and the Init environment.
	Env map[string]string
	// Cwd defaults to the user's home.
	Cwd string
	// User runs the process as that user of the sandbox (and makes Cwd
	// default to their home); empty means the default user. An unknown
	// user is an error wrapping sandbox.ErrUnauthenticated, as envd answers.
	User string
	// Tag labels the process in List; empty means none.
	Tag string
	// Stdin keeps a stdin pipe open for Input; false gives /dev/null.
	Stdin bool
	// PTY, when set, runs the process on a terminal of that size.
	PTY *PTYSize
	// Timeout, when positive, has the agent kill the process that long
	// after it starts, whether or not a stream is attached.
	Timeout time.Duration
}

// PTYSize is a terminal size in character cells.
type PTYSize struct{ Cols, Rows uint32 }

// ProcessInfo describes a running process.
type ProcessInfo struct {
	Pid uint32
	// Tag is nil when the process has none.
	Tag *string
	// Argv is the command as run, program first.
	Argv []string
	// Cwd is the resolved working directory.
	Cwd string
	// PTY is true for a process on a terminal.
	PTY bool
	// Stdin is true when a stdin pipe is open for input.
	Stdin bool
}

// ProcessEvent is one event of a process stream: output in one of
// Stdout, Stderr and PTY, or End, the last event.
type ProcessEvent struct {
	Stdout, Stderr, PTY []byte
	End                 *ExitResult
}

// ProcessStream is an attached process's output. Closing it detaches
// without touching the process.
type ProcessStream struct {
	// Pid is the process's pid inside the sandbox.
	Pid uint32
	// Cwd is the directory the process runs in (set by StartProcess).
	Cwd string

	ctx     context.Context // the caller's, for errors
	receive func() bool
	msg     func() *process.ProcessEvent
	err     func() error
	close   func()
}

// Next returns the next output or the end (End set, after which the stream
// is spent). It blocks until the process writes, ends, or the stream's
// context is cancelled (then the error wraps ctx.Err()).
func (s *ProcessStream) Next() (ProcessEvent, error) {
	for s.receive() {
		ev := s.msg()
		switch {
		case ev.GetData() != nil:
			d := ev.GetData()
			return ProcessEvent{Stdout: d.GetStdout(), Stderr: d.GetStderr(), PTY: d.GetPty()}, nil
		case ev.GetEnd() != nil:
			end := ev.GetEnd()
			return ProcessEvent{End: &ExitResult{
				Code: int(end.GetExitCode()), Signaled: !end.GetExited(), Status: end.GetStatus(), TimedOut: end.GetTimedOut(),
			}}, nil
		}
		// keepalives and anything newer are skipped
	}
	return ProcessEvent{}, rpcErr(s.ctx, fmt.Sprintf("agent process %d stream", s.Pid), orEOF(s.err()))
}

// Close detaches from the process; it keeps running.
func (s *ProcessStream) Close() { s.close() }

// detached returns a context that is cancelled with ctx but carries no
// deadline: a deadline would travel to the agent as Connect-Timeout-Ms,
// and a Start stream whose deadline passes kills its process.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	return sctx, func() { stop(); cancel() }
}

// StartProcess starts a background process and returns its output stream,
// attached before the process could write. The process outlives the
// stream: closing it (or cancelling ctx) only detaches.
func (c *Client) StartProcess(ctx context.Context, req ProcessRequest) (*ProcessStream, error) {
	sctx, cancel := detached(ctx)
	cfg := &process.ProcessConfig{Cmd: req.Cmd, Args: req.Args, Envs: req.Env}
	if req.Cwd != "" {
		cfg.Cwd = &req.Cwd
	}
	msg := &process.StartRequest{Process: cfg, Stdin: &req.Stdin}
	if req.Tag != "" {
		msg.Tag = &req.Tag
	}
	if req.PTY != nil {
		msg.Pty = &process.PTY{Size: &process.PTY_Size{Cols: req.PTY.Cols, Rows: req.PTY.Rows}}
	}
	if req.Timeout > 0 {
		msg.TimeoutMs = uint32(max(1, req.Timeout.Milliseconds()))
	}
	creq := connect.NewRequest(msg)
	if req.User != "" {
		// envd's way of naming the user: Basic auth with an empty password.
		creq.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(req.User+":")))
	}
	stream, err := c.proc.Start(sctx, creq)
	return openStream(ctx, cancel, stream, err, "agent start process", "agent start process")
}

// ConnectProcess attaches to a process's output from now on (ending with
// its end event); sandbox.ErrNotFound for an unknown pid.
func (c *Client) ConnectProcess(ctx context.Context, pid uint32) (*ProcessStream, error) {
	sctx, cancel := detached(ctx)
	stream, err := c.proc.Connect(sctx, connect.NewRequest(&process.ConnectRequest{Process: pidSelector(pid)}))
	return openStream(ctx, cancel, stream, err, "agent connect process", fmt.Sprintf("agent connect process %d", pid))
}

// openStream is a ProcessStream on the Start or Connect stream the call
// that returned err opened, once its start event is read. cancel ends the
// stream's detached context; op names the call when it fails, firstOp when
// the start event does not come.
func openStream[R any, M interface {
	*R
	GetEvent() *process.ProcessEvent
}](ctx context.Context, cancel context.CancelFunc, stream *connect.ServerStreamForClient[R], err error, op, firstOp string) (*ProcessStream, error) {
	if err != nil {
		cancel()
		return nil, procErr(ctx, op, err)
	}
	ps := &ProcessStream{ctx: ctx, receive: stream.Receive,
		msg: func() *process.ProcessEvent { return M(stream.Msg()).GetEvent() },
		err: stream.Err, close: func() { cancel(); stream.Close() }}
	if err := ps.first(); err != nil {
		return nil, procErr(ctx, firstOp, err)
	}
	return ps, nil
}

// first reads the start event (closing the stream on failure).
func (s *ProcessStream) first() error {
	if !s.receive() {
		err := orEOF(s.err())
		s.close()
		return err
	}
	start := s.msg().GetStart()
	if start == nil {
		s.close()
		return fmt.Errorf("first event is not start: %w", sandbox.ErrUnavailable)
	}
	s.Pid, s.Cwd = start.GetPid(), start.GetCwd()
	return nil
}

// ListProcesses returns the running processes, by pid.
func (c *Client) ListProcesses(ctx context.Context) ([]ProcessInfo, error) {
	resp, err := c.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		return nil, procErr(ctx, "agent list processes", err)
	}
	out := make([]ProcessInfo, 0, len(resp.Msg.GetProcesses()))
	for _, p := range resp.Msg.GetProcesses() {
		cfg := p.GetConfig()
		out = append(out, ProcessInfo{
			Pid: p.GetPid(), Tag: p.Tag, Argv: append([]string{cfg.GetCmd()}, cfg.GetArgs()...),
			Cwd: p.GetCwd(), PTY: p.GetPty(), Stdin: p.GetStdin(),
		})
	}
	return out, nil
}

// ProcessInput writes data to a process's stdin (or its terminal), then
// with eof closes stdin (types Ctrl-D on a terminal). A process with
// neither an open stdin nor a terminal is sandbox.ErrConflict.
func (c *Client) ProcessInput(ctx context.Context, pid uint32, data []byte, eof bool) error {
	sel := pidSelector(pid)
	const chunk = 64 << 10
	for len(data) > 0 {
		n := min(chunk, len(data))
		in := &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: data[:n]}}
		if _, err := c.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: in})); err != nil {
			return procErr(ctx, fmt.Sprintf("agent input to process %d", pid), err)
		}
		data = data[n:]
	}
	if eof {
		if _, err := c.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); err != nil {
			return procErr(ctx, fmt.Sprintf("agent close stdin of process %d", pid), err)
		}
	}
	return nil
}

// Signal sends signal number sig to a process's group; the agent takes
// SIGHUP, SIGINT, SIGQUIT, SIGKILL, SIGUSR1, SIGUSR2, SIGTERM, SIGCONT,
// SIGSTOP and SIGTSTP. sandbox.ErrNotFound once the process has exited.
func (c *Client) Signal(ctx context.Context, pid uint32, sig int) error {
	_, err := c.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pidSelector(pid), Signal: process.Signal(sig)}))
	if err != nil {
		return procErr(ctx, fmt.Sprintf("agent signal process %d", pid), err)
	}
	return nil
}

// ResizePTY sets a terminal process's size; a process without one is
// sandbox.ErrConflict.
func (c *Client) ResizePTY(ctx context.Context, pid uint32, size PTYSize) error {
	_, err := c.proc.Update(ctx, connect.NewRequest(&process.UpdateRequest{
		Process: pidSelector(pid), Pty: &process.PTY{Size: &process.PTY_Size{Cols: size.Cols, Rows: size.Rows}},
	}))
	if err != nil {
		return procErr(ctx, fmt.Sprintf("agent resize process %d", pid), err)
	}
	return nil
}

func pidSelector(pid uint32) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
}

// procErr is rpcErr for process operations, where the agent's
// failed_precondition (no stdin, not a terminal) means the process's
// state forbids the call: a conflict, not bad input.
func procErr(ctx context.Context, op string, err error) error {
	var ce *connect.Error
	if ctx.Err() == nil && errors.As(err, &ce) && ce.Code() == connect.CodeFailedPrecondition {
		return fmt.Errorf("%s: %s: %w", op, ce.Message(), sandbox.ErrConflict)
	}
	return rpcErr(ctx, op, err)
}
