package controlplane

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Background processes (the processes routes of api/openapi.yaml),
// started in a running sandbox through pt-agent's process service,
// outlive the request that started them: streams attach and detach
// without touching them.

// ProcessRequest starts one background process.
type ProcessRequest struct {
	// Argv is the command; a shell string arrives as ["/bin/sh","-c",s].
	Argv []string
	Env  map[string]string
	Cwd  string
	// User runs the process as that user of the sandbox (root, or user
	// where the template has it); empty means the sandbox's default user.
	User string
	Tag  string
	// Stdin keeps stdin open for ProcessInput.
	Stdin bool
	// PTY, when set, runs the process on a terminal of that size.
	PTY *PTYSize
	// Timeout, when positive, kills the process that long after it starts.
	Timeout time.Duration
}

// PTYSize is a terminal size in character cells.
type PTYSize = agentclient.PTYSize

// ProcessInfo describes a running process.
type ProcessInfo = agentclient.ProcessInfo

// ProcessEvent is one event of a process stream.
type ProcessEvent = agentclient.ProcessEvent

// MaxPTYSide bounds a terminal's columns and rows.
const MaxPTYSide = 10000

// maxTagLen bounds a process tag.
const maxTagLen = 256

// ProcessStream is an attached process's output; Close detaches.
type ProcessStream struct {
	*agentclient.ProcessStream
	done func()
}

// Close detaches from the process, which keeps running.
func (s *ProcessStream) Close() {
	s.ProcessStream.Close()
	s.done()
}

// Signals are the signal names SignalProcess takes.
var Signals = map[string]unix.Signal{
	"SIGHUP": unix.SIGHUP, "SIGINT": unix.SIGINT, "SIGQUIT": unix.SIGQUIT, "SIGKILL": unix.SIGKILL,
	"SIGUSR1": unix.SIGUSR1, "SIGUSR2": unix.SIGUSR2, "SIGTERM": unix.SIGTERM, "SIGCONT": unix.SIGCONT,
	"SIGSTOP": unix.SIGSTOP, "SIGTSTP": unix.SIGTSTP,
}

// SignalNames lists Signals' keys, sorted, for messages.
func SignalNames() string {
	names := make([]string, 0, len(Signals))
	for n := range Signals {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// validUser is the shape of a user name a process may run as (what
// useradd accepts, at most 32 bytes).
var validUser = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,30}\$?$`)

// ValidateUser checks the shape of a user name; whether the sandbox has
// that user is for its agent to say.
func ValidateUser(name string) error {
	if name != "" && !validUser.MatchString(name) {
		return &sandbox.FieldError{Field: "user", Reason: fmt.Sprintf("%q is not a user name (lower-case letters, digits, _ . -, at most 32)", name)}
	}
	return nil
}

// ValidatePTY checks a terminal size; field names the request field
// ("pty" for a start, "" for a resize body) in the error.
func ValidatePTY(size PTYSize, field string) error {
	prefix := ""
	if field != "" {
		prefix = field + "."
	}
	for _, side := range []struct {
		name string
		v    uint32
	}{{"cols", size.Cols}, {"rows", size.Rows}} {
		if side.v < 1 || side.v > MaxPTYSide {
			return &sandbox.FieldError{Field: prefix + side.name, Reason: fmt.Sprintf("must be between 1 and %d", MaxPTYSide)}
		}
	}
	return nil
}

// StartProcess starts a background process in a running sandbox and
// returns its output stream; the sandbox's current env (Init) applies
// under r.Env. The caller closes the stream, which only detaches.
func (s *Service) StartProcess(ctx context.Context, p Principal, id string, r ProcessRequest) (*ProcessStream, error) {
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return nil, &sandbox.FieldError{Field: "cmd", Reason: "must be a non-empty argv array or shell string"}
	}
	if r.Timeout < 0 || r.Timeout > MaxExecTimeout {
		return nil, &sandbox.FieldError{Field: "timeout_ms", Reason: "must be positive and at most 24 hours"}
	}
	if len(r.Tag) > maxTagLen {
		return nil, &sandbox.FieldError{Field: "tag", Reason: fmt.Sprintf("must be at most %d bytes", maxTagLen)}
	}
	if r.PTY != nil {
		if err := ValidatePTY(*r.PTY, "pty"); err != nil {
			return nil, err
		}
	}
	if err := ValidateEnv(r.Env); err != nil {
		return nil, err
	}
	if err := ValidateUser(r.User); err != nil {
		return nil, err
	}
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return nil, err
	}
	done := s.attached(id)
	st, err := ag.StartProcess(ctx, agentclient.ProcessRequest{
		Cmd: r.Argv[0], Args: r.Argv[1:], Env: r.Env, Cwd: r.Cwd, User: r.User, Tag: r.Tag,
		Stdin: r.Stdin, PTY: r.PTY, Timeout: r.Timeout,
	})
	if err != nil {
		done()
		if r.User != "" && errors.Is(err, sandbox.ErrUnauthenticated) {
			// The agent names an unknown user as envd does; the caller
			// gets a bad field, not a failed login.
			return nil, &sandbox.FieldError{Field: "user", Reason: fmt.Sprintf("no user %q in this sandbox (its /etc/passwd)", r.User)}
		}
		return nil, fmt.Errorf("start process: %w", err)
	}
	return &ProcessStream{ProcessStream: st, done: done}, nil
}

// ConnectProcess attaches to a running process's output from now on.
func (s *Service) ConnectProcess(ctx context.Context, p Principal, id string, pid uint32) (*ProcessStream, error) {
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return nil, err
	}
	done := s.attached(id)
	st, err := ag.ConnectProcess(ctx, pid)
	if err != nil {
		done()
		return nil, err
	}
	return &ProcessStream{ProcessStream: st, done: done}, nil
}

// attached counts an open process stream as a command in flight (status
// running, like exec) until the returned func runs; its end is activity.
func (s *Service) attached(id string) func() {
	done := s.busy.Start(id)
	return func() {
		done()
		s.Touch(id)
	}
}

// Processes lists a running sandbox's running processes.
func (s *Service) Processes(ctx context.Context, p Principal, id string) ([]ProcessInfo, error) {
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return ag.ListProcesses(ctx)
}

// ProcessInput writes data to a process's stdin (or terminal), then with
// eof ends its input. sandbox.ErrConflict when it takes no input.
func (s *Service) ProcessInput(ctx context.Context, p Principal, id string, pid uint32, data []byte, eof bool) error {
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return err
	}
	return ag.ProcessInput(ctx, pid, data, eof)
}

// SignalProcess sends the named signal (a key of Signals) to a process's
// process group.
func (s *Service) SignalProcess(ctx context.Context, p Principal, id string, pid uint32, signal string) error {
	sig, ok := Signals[signal]
	if !ok {
		return &sandbox.FieldError{Field: "signal", Reason: "must be one of " + SignalNames()}
	}
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return err
	}
	return ag.Signal(ctx, pid, int(sig))
}

// ResizeProcess sets a terminal process's size; sandbox.ErrConflict when
// it has no terminal.
func (s *Service) ResizeProcess(ctx context.Context, p Principal, id string, pid uint32, size PTYSize) error {
	if err := ValidatePTY(size, ""); err != nil {
		return err
	}
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return err
	}
	return ag.ResizePTY(ctx, pid, size)
}
