package agent

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/api/gen/process"
)

// proc is one process the agent started, with the streams attached to it.
type proc struct {
	pid    int
	tag    *string
	cfg    *process.ProcessConfig
	dir    string   // resolved working directory
	master *os.File // PTY master; nil for pipe processes
	stdin  *os.File // stdin pipe; nil when stdin was not requested
	outs   []output
	done   chan struct{} // closed once the end event exists

	inMu        sync.Mutex // serializes input writes and CloseStdin
	stdinClosed bool

	mu       sync.Mutex
	exited   bool // the wait status was collected: the pid may be reused
	timedOut bool // the timeout's SIGKILL was sent
	timer    *time.Timer
	subs     map[*subscriber]struct{}
	end      *process.ProcessEvent_EndEvent
}

type output struct {
	f    *os.File
	kind outputKind
}

type outputKind int

const (
	outStdout outputKind = iota
	outStderr
	outPTY
)

// subscriber is one stream (Start or Connect) receiving a process's events.
// Broadcasts block on a slow subscriber rather than drop output, and stop
// blocking once the subscriber is gone (done closed).
type subscriber struct {
	ch   chan *process.ProcessEvent
	done chan struct{}
	once sync.Once
}

// spawnSpec is everything needed to fork a process.
type spawnSpec struct {
	path  string
	argv  []string
	env   []string
	dir   string
	acct  *account
	pty   *process.PTY // nil for pipes
	stdin bool
	tag   *string
	cfg   *process.ProcessConfig
	// timeout, when positive, kills the process that long after it starts.
	timeout time.Duration
}

// start forks the process described by sp and returns it with a subscriber
// that was attached before any output could be read, so the caller's stream
// misses nothing.
func (s *Server) start(sp spawnSpec) (*proc, *subscriber, error) {
	p := &proc{tag: sp.tag, cfg: sp.cfg, dir: sp.dir, done: make(chan struct{}), subs: map[*subscriber]struct{}{}}
	sys := &syscall.SysProcAttr{}
	if os.Getuid() != int(sp.acct.uid) || os.Getgid() != int(sp.acct.gid) {
		sys.Credential = &syscall.Credential{Uid: sp.acct.uid, Gid: sp.acct.gid, Groups: sp.acct.groups}
	}
	var child []*os.File // closed in the parent once forked
	defer func() {
		for _, f := range child {
			f.Close()
		}
	}()
	fail := func(err error) (*proc, *subscriber, error) {
		for _, o := range p.outs {
			o.f.Close()
		}
		if p.stdin != nil {
			p.stdin.Close()
		}
		return nil, nil, err
	}
	if sp.pty != nil {
		master, tty, err := openPTY(sp.pty.GetSize())
		if err != nil {
			return fail(fmt.Errorf("open pty: %w", err))
		}
		p.master = master
		p.outs = []output{{master, outPTY}}
		child = []*os.File{tty, tty, tty}
		sys.Setsid, sys.Setctty, sys.Ctty = true, true, 0
	} else {
		var in *os.File
		if sp.stdin {
			r, w, err := os.Pipe()
			if err != nil {
				return fail(fmt.Errorf("stdin pipe: %w", err))
			}
			in, p.stdin = r, w
		} else {
			f, err := os.Open(os.DevNull)
			if err != nil {
				return fail(err)
			}
			in = f
		}
		child = append(child, in)
		for _, kind := range []outputKind{outStdout, outStderr} {
			r, w, err := os.Pipe()
			if err != nil {
				return fail(fmt.Errorf("output pipe: %w", err))
			}
			p.outs = append(p.outs, output{r, kind})
			child = append(child, w)
		}
		sys.Setpgid = true // so a kill reaches the whole job
	}
	fds := make([]uintptr, len(child))
	for i, f := range child {
		fds[i] = f.Fd()
	}
	sub := p.subscribe()
	pid, exit, err := s.spawn.spawn(func() (int, error) {
		return syscall.ForkExec(sp.path, sp.argv, &syscall.ProcAttr{Dir: sp.dir, Env: sp.env, Files: fds, Sys: sys})
	})
	if err != nil {
		return fail(fmt.Errorf("start %s: %w", sp.path, err))
	}
	p.pid = pid
	if sp.timeout > 0 {
		p.mu.Lock()
		p.timer = time.AfterFunc(sp.timeout, func() {
			if p.killForTimeout() {
				s.log.Info("process killed: timeout passed", "pid", p.pid, "timeout", sp.timeout)
			}
		})
		p.mu.Unlock()
	}
	s.procs.add(p)
	go s.supervise(p, exit)
	return p, sub, nil
}

// killForTimeout sends the timeout's SIGKILL unless the process has been
// reaped; it reports whether it did. The mark is set first so the end
// event, however soon it follows, says timed_out.
func (p *proc) killForTimeout() bool {
	p.mu.Lock()
	if p.exited {
		p.mu.Unlock()
		return false
	}
	p.timedOut = true
	p.mu.Unlock()
	if err := p.signal(unix.SIGKILL); err != nil {
		p.mu.Lock()
		p.timedOut = false
		p.mu.Unlock()
		return false
	}
	return true
}

// supervise pumps output to subscribers and, once the process has exited,
// drains what is already buffered (bounded by the drain window, which only
// matters when a background grandchild holds the pipe open) and sends the
// single end event.
func (s *Server) supervise(p *proc, exit <-chan unix.WaitStatus) {
	var wg sync.WaitGroup
	for _, o := range p.outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.pump(o)
		}()
	}
	ws := <-exit
	s.noteExit(ws)
	p.mu.Lock()
	p.exited = true
	if p.timer != nil {
		p.timer.Stop()
	}
	timedOut := p.timedOut && !ws.Exited()
	p.mu.Unlock()
	deadline := time.Now().Add(s.cfg.DrainWindow)
	for _, o := range p.outs {
		if err := o.f.SetReadDeadline(deadline); err != nil {
			s.log.Warn("output without deadline support", "pid", p.pid, "err", err)
		}
	}
	wg.Wait()
	for _, o := range p.outs {
		o.f.Close()
	}
	if p.stdin != nil {
		p.stdin.Close() // unblocks a pending SendInput
	}
	end := &process.ProcessEvent_EndEvent{ExitCode: int32(exitCode(ws)), Exited: ws.Exited(), Status: statusString(ws), TimedOut: timedOut}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		end.Error = &end.Status
	}
	s.log.Debug("process ended", "pid", p.pid, "status", end.Status)
	p.finish(end)
	time.AfterFunc(s.cfg.EndRetention, func() { s.procs.remove(p) })
}

// noteExit pokes the memory guard when a process ended by SIGKILL, or is
// a shell that reports a child's (exit status 128+9): it may be an OOM
// kill by the guest's own kernel, which the guard then reports at once
// (MemoryGuard.readKernelKills) rather than at its next idle look.
func (s *Server) noteExit(ws unix.WaitStatus) {
	if g := s.cfg.MemoryGuard; g != nil && (ws.Signaled() && ws.Signal() == unix.SIGKILL || ws.Exited() && ws.ExitStatus() == 128+int(unix.SIGKILL)) {
		g.Poke()
	}
}

func (p *proc) pump(o output) {
	buf := make([]byte, 32<<10)
	for {
		n, err := o.f.Read(buf)
		if n > 0 {
			p.broadcast(dataEvent(o.kind, bytes.Clone(buf[:n])))
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			p.drainBuffered(o, buf)
			return
		}
		if err != nil {
			return // EOF, EIO (PTY slave closed), or closed
		}
	}
}

// maxDrain bounds what drainBuffered reads: a background grandchild that
// holds the pipe open and keeps writing must not keep the end event back.
const maxDrain = 1 << 20

// drainBuffered reads what the pipe already holds, without waiting for more.
// The drain deadline bounds waiting for output after the process exited,
// but a Read past an expired deadline fails before it looks at the pipe:
// a pump goroutine scheduled late on a busy host would drop output the
// process wrote before it exited (an exec answering exit 0 with no stdout).
func (p *proc) drainBuffered(o output, buf []byte) {
	if o.f.SetReadDeadline(time.Time{}) != nil {
		return
	}
	rc, err := o.f.SyscallConn()
	if err != nil {
		return
	}
	total := 0
	rc.Read(func(fd uintptr) bool {
		for total < maxDrain {
			n, err := unix.Read(int(fd), buf)
			if n <= 0 || err != nil {
				break // EAGAIN: nothing more buffered; 0: EOF
			}
			total += n
			p.broadcast(dataEvent(o.kind, bytes.Clone(buf[:n])))
		}
		return true // never wait for readiness
	})
}

func dataEvent(kind outputKind, b []byte) *process.ProcessEvent {
	d := &process.ProcessEvent_DataEvent{}
	switch kind {
	case outStdout:
		d.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: b}
	case outStderr:
		d.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: b}
	default:
		d.Output = &process.ProcessEvent_DataEvent_Pty{Pty: b}
	}
	return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: d}}
}

// startEvent announces p; ext adds Platinum's extension fields.
func startEvent(p *proc, ext bool) *process.ProcessEvent {
	start := &process.ProcessEvent_StartEvent{Pid: uint32(p.pid)}
	if ext {
		start.Cwd = p.dir
	}
	return &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: start}}
}

func endEvent(end *process.ProcessEvent_EndEvent) *process.ProcessEvent {
	return &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}
}

func keepaliveEvent() *process.ProcessEvent {
	return &process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}
}

// subscribe attaches a new stream; for a finished process it gets the end
// event replayed at once.
func (p *proc) subscribe() *subscriber {
	sub := &subscriber{ch: make(chan *process.ProcessEvent, 32), done: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil {
		sub.ch <- endEvent(p.end)
		return sub
	}
	p.subs[sub] = struct{}{}
	return sub
}

func (p *proc) unsubscribe(sub *subscriber) {
	p.mu.Lock()
	delete(p.subs, sub)
	p.mu.Unlock()
	sub.once.Do(func() { close(sub.done) })
}

func (p *proc) broadcast(ev *process.ProcessEvent) {
	p.mu.Lock()
	subs := slices.Collect(maps.Keys(p.subs))
	p.mu.Unlock()
	for _, sub := range subs {
		select {
		case sub.ch <- ev:
		case <-sub.done:
		}
	}
}

func (p *proc) finish(end *process.ProcessEvent_EndEvent) {
	p.mu.Lock()
	p.end = end
	subs := slices.Collect(maps.Keys(p.subs))
	p.subs = nil
	p.mu.Unlock()
	close(p.done)
	ev := endEvent(end)
	for _, sub := range subs {
		select {
		case sub.ch <- ev:
		case <-sub.done:
		}
	}
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.end == nil
}

// signal sends sig to the process's group (so a shell's children die with
// it), falling back to the process alone if it left its group.
func (p *proc) signal(sig unix.Signal) error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited {
		return fmt.Errorf("process %d: already exited: %w", p.pid, errNotFound)
	}
	err := unix.Kill(-p.pid, sig)
	if errors.Is(err, unix.ESRCH) {
		err = unix.Kill(p.pid, sig)
	}
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("process %d: %w", p.pid, errNotFound)
	}
	return err
}

func (p *proc) write(in *process.ProcessInput) error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	var (
		f    *os.File
		data []byte
	)
	switch x := in.GetInput().(type) {
	case *process.ProcessInput_Stdin:
		switch {
		case p.master != nil:
			// A PTY process's stdin is its terminal: the native API
			// sends input without knowing which of the two it has.
			f, data = p.master, x.Stdin
		case p.stdin == nil || p.stdinClosed:
			return fmt.Errorf("process %d: stdin not open: %w", p.pid, errPrecondition)
		default:
			f, data = p.stdin, x.Stdin
		}
	case *process.ProcessInput_Pty:
		if p.master == nil {
			return fmt.Errorf("process %d: not a pty: %w", p.pid, errPrecondition)
		}
		f, data = p.master, x.Pty
	default:
		return fmt.Errorf("input: neither stdin nor pty: %w", errInvalid)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("process %d: write input: %v: %w", p.pid, err, errPrecondition)
	}
	return nil
}

// closeStdin ends the process's input: it closes the stdin pipe, or on a
// PTY types the terminal's EOF character (Ctrl-D), which ends input at the
// start of a line.
func (p *proc) closeStdin() error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.master != nil {
		if _, err := p.master.Write([]byte{0x04}); err != nil {
			return fmt.Errorf("process %d: write EOF: %v: %w", p.pid, err, errPrecondition)
		}
		return nil
	}
	if p.stdin == nil {
		return fmt.Errorf("process %d: stdin not open: %w", p.pid, errPrecondition)
	}
	if p.stdinClosed {
		return nil
	}
	p.stdinClosed = true
	return p.stdin.Close()
}

func (p *proc) resize(size *process.PTY_Size) error {
	if p.master == nil {
		return fmt.Errorf("process %d: not a pty: %w", p.pid, errPrecondition)
	}
	return setSize(p.master, size)
}

// openPTY opens a PTY pair. creack/pty's ioctls leave the master in blocking
// mode, so the master is duplicated into a non-blocking, poller-managed
// file: reads then honour deadlines and Close interrupts them.
func openPTY(size *process.PTY_Size) (master, tty *os.File, err error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	m.Close()
	if err != nil {
		tty.Close()
		return nil, nil, fmt.Errorf("dup pty master: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		tty.Close()
		return nil, nil, fmt.Errorf("pty master nonblock: %w", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := setSize(master, size); err != nil {
		master.Close()
		tty.Close()
		return nil, nil, err
	}
	return master, tty, nil
}

func setSize(f *os.File, size *process.PTY_Size) error {
	ws := &unix.Winsize{Col: 80, Row: 24}
	if size.GetCols() > 0 {
		ws.Col = uint16(size.GetCols())
	}
	if size.GetRows() > 0 {
		ws.Row = uint16(size.GetRows())
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) { ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws) }); err != nil {
		return err
	}
	if ioErr != nil {
		return fmt.Errorf("set pty size: %w", ioErr)
	}
	return nil
}

// procTable indexes started processes by pid; finished ones stay for
// EndRetention so Connect can replay their end.
type procTable struct {
	mu    sync.Mutex
	byPid map[int]*proc
}

func newProcTable() *procTable { return &procTable{byPid: map[int]*proc{}} }

func (t *procTable) add(p *proc) {
	t.mu.Lock()
	t.byPid[p.pid] = p
	t.mu.Unlock()
}

func (t *procTable) remove(p *proc) {
	t.mu.Lock()
	if t.byPid[p.pid] == p {
		delete(t.byPid, p.pid)
	}
	t.mu.Unlock()
}

func (t *procTable) running() []*proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*proc
	for _, p := range t.byPid {
		if p.running() {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *proc) int { return a.pid - b.pid })
	return out
}

// get finds a process by pid or tag; a running process wins over a
// finished one with the same tag.
func (t *procTable) get(sel *process.ProcessSelector) (*proc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch x := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		if p, ok := t.byPid[int(x.Pid)]; ok {
			return p, nil
		}
		return nil, fmt.Errorf("process %d: %w", x.Pid, errNotFound)
	case *process.ProcessSelector_Tag:
		var found *proc
		for _, p := range t.byPid {
			if p.tag != nil && *p.tag == x.Tag && (found == nil || p.running()) {
				found = p
			}
		}
		if found == nil {
			return nil, fmt.Errorf("process tag %q: %w", x.Tag, errNotFound)
		}
		return found, nil
	}
	return nil, fmt.Errorf("process selector: neither pid nor tag: %w", errInvalid)
}
