package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
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

// TerminalTagPrefix starts the tag of every terminal's process (GET
// /processes shows it), so a hang-up delivered late finds exactly the
// process it was meant for.
const TerminalTagPrefix = "terminal-"

// Terminal is a process attached to one interactive client. Next carries
// the output; Input, Resize and Hangup act on the process through the
// agent client it was started with, so a keystroke costs no database
// lookup.
//
// The agent connection breaks when the sandbox stops, is snapshotted or
// forked (the host resets its connections first): Next then waits until
// that operation is over and reattaches when the sandbox still runs, so a
// snapshot does not end a session. When the sandbox stopped, Next ends
// with a *StateError and the hang-up its process is owed is delivered at
// the sandbox's next start, never while it is being saved: a connection
// to the agent opened during a checkpoint would be saved established,
// and gVisor restores such a sandbox with a network stack that no longer
// answers.
type Terminal struct {
	s   *Service
	p   Principal
	id  string
	ctx context.Context
	// Pid is the process's pid in the sandbox.
	Pid uint32
	// Cwd is the directory it runs in.
	Cwd string
	tag string

	mu     sync.Mutex
	st     *ProcessStream // the attached stream; replaced by a reattach
	ag     *agentclient.Client
	closed bool
	lost   bool // the sandbox stopped under the terminal
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
	var b [6]byte
	rand.Read(b[:])
	r.Tag = TerminalTagPrefix + hex.EncodeToString(b[:])
	st, err := s.StartProcess(ctx, p, id, r)
	if err != nil {
		return nil, err
	}
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &Terminal{s: s, p: p, id: id, ctx: ctx, Pid: st.Pid, Cwd: st.Cwd, tag: r.Tag, st: st, ag: ag}, nil
}

// Next returns the next output or the end (End set). When the agent
// stream breaks under it, it reattaches if the sandbox still runs; a
// sandbox that stopped ends it with a *StateError.
func (t *Terminal) Next() (ProcessEvent, error) {
	for {
		t.mu.Lock()
		st := t.st
		t.mu.Unlock()
		if st == nil {
			return ProcessEvent{}, context.Canceled // closed while reattaching
		}
		ev, err := st.Next()
		if err == nil {
			return ev, nil
		}
		if t.isClosed() || t.ctx.Err() != nil {
			return ev, err
		}
		if rerr := t.reattach(); rerr != nil {
			return ProcessEvent{}, rerr
		}
	}
}

// reattach waits until whatever holds the sandbox (a stop, a snapshot)
// lets go, then attaches a new stream to the process.
func (t *Terminal) reattach() error {
	t.mu.Lock()
	old := t.st
	t.st = nil // detached until a new stream is attached
	t.mu.Unlock()
	if old != nil {
		old.Close()
	}
	t.s.locks.Lock(t.id)() // wait out the operation that reset the connection
	sb, err := t.s.store.GetSandbox(t.ctx, "", t.id)
	if err != nil {
		return err
	}
	if sb.State != sandbox.StateRunning {
		t.mu.Lock()
		t.lost = true
		t.mu.Unlock()
		t.s.hangups.add(t.id, t.Pid, t.tag)
		return &StateError{State: sb.State}
	}
	st, err := t.s.ConnectProcess(t.ctx, t.p, t.id, t.Pid)
	if err != nil {
		return err
	}
	_, ag, err := t.s.RunningAgent(t.ctx, t.p, t.id)
	if err != nil {
		st.Close()
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		st.Close()
		return context.Canceled
	}
	t.st, t.ag = st, ag
	return nil
}

func (t *Terminal) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

func (t *Terminal) agent() *agentclient.Client {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ag
}

// Close detaches from the process, which keeps running.
func (t *Terminal) Close() {
	t.mu.Lock()
	t.closed = true
	st := t.st
	t.st = nil
	t.mu.Unlock()
	if st != nil {
		st.Close()
	}
}

// Input writes the client's bytes to the terminal (or stdin); eof ends
// a pipe's input. Like every call to the agent here it first waits out a
// stop or snapshot in progress (the sandbox's lock, free otherwise), so a
// keystroke never opens a connection while the sandbox is being saved.
func (t *Terminal) Input(ctx context.Context, data []byte, eof bool) error {
	t.s.Touch(t.id)
	t.s.locks.Lock(t.id)()
	return t.agent().ProcessInput(ctx, t.Pid, data, eof)
}

// Resize sets the terminal's size.
func (t *Terminal) Resize(ctx context.Context, size PTYSize) error {
	if err := ValidatePTY(size, ""); err != nil {
		return err
	}
	t.s.locks.Lock(t.id)()
	return t.agent().ResizePTY(ctx, t.Pid, size)
}

// Hangup ends a terminal whose client went away, as closing a real
// terminal does: SIGHUP to its process group, SIGKILL if it is still
// there after a grace period. It returns at once. A terminal whose
// sandbox stopped under it is hung up at the next start instead.
func (t *Terminal) Hangup() {
	t.mu.Lock()
	lost := t.lost
	t.mu.Unlock()
	if lost {
		return
	}
	go hangup(t.agent(), t.Pid, "")
}

// hangup sends SIGHUP to pid's process group and SIGKILL after the grace
// period if it is still there. With tag set it acts only when the process
// still carries that tag (a late hang-up must not reach a process that
// reused the pid).
func hangup(ag *agentclient.Client, pid uint32, tag string) {
	ctx, cancel := context.WithTimeout(context.Background(), hangupGrace+10*time.Second)
	defer cancel()
	if tag != "" && !hasProcess(ctx, ag, pid, tag) {
		return
	}
	if err := ag.Signal(ctx, pid, int(unix.SIGHUP)); err != nil {
		return // already gone
	}
	time.Sleep(hangupGrace)
	if hasProcess(ctx, ag, pid, "") {
		ag.Signal(ctx, pid, int(unix.SIGKILL))
	}
}

// hasProcess reports whether pid runs (with that tag, when set).
func hasProcess(ctx context.Context, ag *agentclient.Client, pid uint32, tag string) bool {
	list, err := ag.ListProcesses(ctx)
	if err != nil {
		return false
	}
	for _, pi := range list {
		if pi.Pid == pid && (tag == "" || (pi.Tag != nil && *pi.Tag == tag)) {
			return true
		}
	}
	return false
}

// pendingHangups are the hang-ups owed to terminals whose sandbox stopped
// under them, by sandbox; they are delivered at its next start (to
// processes restored from memory) and dropped when it is deleted. They
// live in memory: after a ptd restart such a shell stays until it exits.
type pendingHangups struct {
	mu sync.Mutex
	m  map[string][]pendingHangup
}

type pendingHangup struct {
	pid uint32
	tag string
}

func (h *pendingHangups) add(id string, pid uint32, tag string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string][]pendingHangup{}
	}
	h.m[id] = append(h.m[id], pendingHangup{pid, tag})
}

func (h *pendingHangups) take(id string) []pendingHangup {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.m[id]
	delete(h.m, id)
	return out
}

// deliverHangups hangs up, in the background, the terminals whose clients
// a stop of sandbox id took away; the sandbox runs again (ag is its agent).
func (s *Service) deliverHangups(id string, ag *agentclient.Client) {
	owed := s.hangups.take(id)
	if len(owed) == 0 {
		return
	}
	s.bg.Go(func(context.Context) {
		var wg sync.WaitGroup
		for _, h := range owed {
			wg.Add(1)
			go func() { defer wg.Done(); hangup(ag, h.pid, h.tag) }()
		}
		wg.Wait()
	})
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
