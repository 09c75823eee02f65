package controlplane

import (
	"context"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Interactive terminals (docs/terminal.md): the PTY WebSocket and the SSH
// gateway both run one process of the processes service per client and
// pump bytes through a Terminal, so there is a single PTY path.

// LoginShell is the command a terminal runs when the client names none:
// bash as a login shell where the image has it, else sh.
var LoginShell = []string{"/bin/sh", "-c", `if [ -x /bin/bash ]; then exec /bin/bash -l; fi; exec /bin/sh -l`}

// DefaultPTY is a terminal's size until the client sets one.
var DefaultPTY = PTYSize{Cols: 80, Rows: 24}

// hangupGrace is how long a hung-up terminal's process group has to
// exit after SIGHUP before it is killed.
const hangupGrace = 2 * time.Second

// Terminal is a process attached to one interactive client. Its stream
// carries the output; Input, Resize and Hangup act on the process
// through the agent client it was started with, so a keystroke costs no
// database lookup.
type Terminal struct {
	*ProcessStream
	s  *Service
	id string
	ag *agentclient.Client
}

// OpenTerminal starts r in a running sandbox for an interactive client:
// LoginShell when r.Argv is empty, TERM=xterm-256color unless r.Env sets
// TERM and r.PTY is set.
func (s *Service) OpenTerminal(ctx context.Context, p Principal, id string, r ProcessRequest) (*Terminal, error) {
	if len(r.Argv) == 0 {
		r.Argv = LoginShell
	}
	if r.PTY != nil {
		if _, ok := r.Env["TERM"]; !ok {
			env := make(map[string]string, len(r.Env)+1)
			for k, v := range r.Env {
				env[k] = v
			}
			env["TERM"] = "xterm-256color"
			r.Env = env
		}
	} else {
		r.Stdin = true
	}
	st, err := s.StartProcess(ctx, p, id, r)
	if err != nil {
		return nil, err
	}
	_, ag, err := s.running(ctx, p, id)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &Terminal{ProcessStream: st, s: s, id: id, ag: ag}, nil
}

// Input writes the client's bytes to the terminal (or stdin); eof ends
// a pipe's input.
func (t *Terminal) Input(ctx context.Context, data []byte, eof bool) error {
	t.s.Touch(t.id)
	return t.ag.ProcessInput(ctx, t.Pid, data, eof)
}

// Resize sets the terminal's size.
func (t *Terminal) Resize(ctx context.Context, size PTYSize) error {
	if err := ValidatePTY(size, ""); err != nil {
		return err
	}
	return t.ag.ResizePTY(ctx, t.Pid, size)
}

// Hangup ends a terminal whose client went away, as closing a real
// terminal does: SIGHUP to its process group, SIGKILL if it is still
// there after a grace period. It returns at once.
func (t *Terminal) Hangup() {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangupGrace+10*time.Second)
		defer cancel()
		if err := t.ag.Signal(ctx, t.Pid, int(unix.SIGHUP)); err != nil {
			return // already gone
		}
		time.Sleep(hangupGrace)
		list, err := t.ag.ListProcesses(ctx)
		if err != nil {
			return
		}
		for _, pi := range list {
			if pi.Pid == t.Pid {
				t.ag.Signal(ctx, t.Pid, int(unix.SIGKILL))
			}
		}
	}()
}

// RequireRunning checks, before a client upgrades its connection, that
// the sandbox is visible to p and running.
func (s *Service) RequireRunning(ctx context.Context, p Principal, id string) error {
	sb, err := s.Get(ctx, p, id, false)
	if err != nil {
		return err
	}
	if sb.State != sandbox.StateRunning {
		return &StateError{State: sb.State}
	}
	return nil
}
