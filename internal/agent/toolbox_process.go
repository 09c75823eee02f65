package agent

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"
)

// executeRequest is the daemon's ExecuteRequest; timeout is in seconds
// (absent or 0: none).
type executeRequest struct {
	Command string            `json:"command"`
	Cwd     string            `json:"cwd"`
	Envs    map[string]string `json:"envs"`
	Timeout *int              `json:"timeout"`
}

func (req executeRequest) validate() error {
	if strings.TrimSpace(req.Command) == "" {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "command is required")
	}
	if req.Timeout != nil && *req.Timeout < 0 {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "timeout must not be negative")
	}
	return validEnvKeys(req.Envs)
}

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func validEnvKeys(env map[string]string) error {
	for k := range env {
		if !envKeyRE.MatchString(k) {
			return tbErr(http.StatusBadRequest, "BAD_REQUEST", "envs: invalid variable name %q", k)
		}
	}
	return nil
}

func seconds(t *int) time.Duration {
	if t == nil || *t <= 0 {
		return 0
	}
	return time.Duration(*t) * time.Second
}

// execute is POST /process/execute: the command runs in sh -c as the
// default user; stdout and stderr are merged into result, as the daemon
// does. A timeout kills the command's process group and answers 408
// PROCESS_EXECUTION_TIMEOUT.
func (tb *toolbox) execute(w http.ResponseWriter, r *http.Request) error {
	var req executeRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	res, err := tb.run(r.Context(), []string{"/bin/sh", "-c", req.Command}, req.Envs, req.Cwd, seconds(req.Timeout))
	if err != nil {
		return err
	}
	if res.timedOut {
		return tbErr(http.StatusRequestTimeout, "PROCESS_EXECUTION_TIMEOUT", "command timed out after %d seconds", *req.Timeout)
	}
	writeJSON(w, http.StatusOK, map[string]any{"exitCode": res.exitCode, "result": string(res.combined)})
	return nil
}

// session is a long-lived shell whose commands run one after another in
// it, so cd and exports carry over (the daemon's sessions). Each command's
// stdout, stderr and exit status come back through FIFOs made for it, so
// the shell's own streams are never parsed.
type session struct {
	id    string
	dir   string // the command FIFOs
	shell *proc
	acct  *account
	mu    sync.Mutex
	cmds  []*sessionCommand
	ended bool
}

// sessionCommand is one command of a session and its log.
type sessionCommand struct {
	id      string
	command string
	mu      sync.Mutex
	chunks  []logChunk
	exit    *int
	done    chan struct{} // closed once the exit code is known
	drained chan struct{} // closed once both streams reached EOF (or were abandoned)
	notify  chan struct{} // closed and replaced on every change
}

type logChunk struct {
	stderr bool
	data   []byte
}

// Markers the daemon writes before each stdout and stderr chunk of a log
// stream; the SDK demultiplexes followed logs by them.
var (
	markStdout = []byte{1, 1, 1}
	markStderr = []byte{2, 2, 2}
)

func (c *sessionCommand) append(stderr bool, b []byte) {
	c.mu.Lock()
	c.chunks = append(c.chunks, logChunk{stderr, b})
	close(c.notify)
	c.notify = make(chan struct{})
	c.mu.Unlock()
}

// snapshot returns the chunks from index from on, the change channel to
// wait on, and whether the log is complete.
func (c *sessionCommand) snapshot(from int) ([]logChunk, chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Complete once both streams ended and the exit code is known (the
	// shell writes it after closing the streams).
	complete := false
	select {
	case <-c.drained:
		select {
		case <-c.done:
			complete = true
		default:
		}
	default:
	}
	return c.chunks[min(from, len(c.chunks)):], c.notify, complete
}

func (c *sessionCommand) outputs() (stdout, stderr, output []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.chunks {
		if ch.stderr {
			stderr = append(stderr, ch.data...)
		} else {
			stdout = append(stdout, ch.data...)
		}
		output = append(output, ch.data...)
	}
	return
}

func (c *sessionCommand) view() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := map[string]any{"id": c.id, "command": c.command}
	if c.exit != nil {
		v["exitCode"] = *c.exit
	}
	return v
}

var sessionIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// toolboxRunDir holds the sessions' FIFOs inside the sandbox.
const toolboxRunDir = "/tmp/.pt-toolbox"

func (tb *toolbox) createSession(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if !sessionIDRE.MatchString(req.SessionID) {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "sessionId must be 1-128 letters, digits, '.', '_' or '-'")
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if _, ok := tb.sessions[req.SessionID]; ok {
		return tbErr(http.StatusConflict, "CONFLICT", "session %s already exists", req.SessionID)
	}
	s := tb.s
	acct, err := s.lookupAccount("")
	if err != nil {
		return err
	}
	dir := filepath.Join(toolboxRunDir, req.SessionID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	chown(toolboxRunDir, acct)
	chown(dir, acct)
	wd, err := s.workdir(acct, nil)
	if err != nil {
		return err
	}
	env := buildEnv(acct, s.sandboxEnv(), nil)
	p, sub, err := s.start(spawnSpec{path: "/bin/sh", argv: []string{"/bin/sh"}, env: env, dir: wd, acct: acct, stdin: true})
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	p.unsubscribe(sub) // the shell's own streams carry nothing we read
	ses := &session{id: req.SessionID, dir: dir, shell: p, acct: acct}
	tb.sessions[req.SessionID] = ses
	go func() {
		// A command that exits the shell (exit, exec) ends the session:
		// the commands still waiting learn it at once.
		<-p.done
		ses.mu.Lock()
		ses.ended = true
		cmds := append([]*sessionCommand(nil), ses.cmds...)
		ses.mu.Unlock()
		for _, c := range cmds {
			ses.unblock(c)
		}
	}()
	w.WriteHeader(http.StatusCreated)
	return nil
}

func (tb *toolbox) session(id string) (*session, error) {
	return lookup(tb, tb.sessions, id, "NOT_FOUND", "session")
}

func (ses *session) view() map[string]any {
	ses.mu.Lock()
	cmds := append([]*sessionCommand(nil), ses.cmds...)
	ses.mu.Unlock()
	views := make([]map[string]any, 0, len(cmds))
	for _, c := range cmds {
		views = append(views, c.view())
	}
	return map[string]any{"sessionId": ses.id, "commands": views}
}

func (tb *toolbox) listSessions(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, views(tb, tb.sessions))
	return nil
}

func (tb *toolbox) getSession(w http.ResponseWriter, r *http.Request) error {
	return writeView(w, r.PathValue("sid"), tb.session)
}

// deleteSession kills the session's shell and everything in its process
// group (its commands, background jobs included).
func (tb *toolbox) deleteSession(w http.ResponseWriter, r *http.Request) error {
	tb.mu.Lock()
	ses, ok := tb.sessions[r.PathValue("sid")]
	delete(tb.sessions, r.PathValue("sid"))
	tb.mu.Unlock()
	if !ok {
		return tbErr(http.StatusNotFound, "NOT_FOUND", "session %s not found", r.PathValue("sid"))
	}
	_ = ses.shell.signal(unix.SIGKILL)
	ses.mu.Lock()
	for _, c := range ses.cmds {
		ses.abandon(c)
	}
	ses.mu.Unlock()
	os.RemoveAll(ses.dir)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// exitCode is the exit code of an ended process.
func (p *proc) exitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end == nil {
		return -1
	}
	return int(p.end.GetExitCode())
}

// abandon unblocks the FIFO readers of a command that will never run (its
// shell is gone): opening a FIFO read-write completes their open.
func (ses *session) abandon(c *sessionCommand) {
	for _, ext := range []string{".out", ".err", ".exit"} {
		if f, err := os.OpenFile(filepath.Join(ses.dir, c.id+ext), os.O_RDWR|unix.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
}

// unblock abandons a command of an ended shell until its readers are
// done: one abandon is not enough when a reader had not opened its FIFO
// yet (its goroutine had not run), since its open would then wait for a
// writer that never comes. It gives up after abandonWait.
func (ses *session) unblock(c *sessionCommand) {
	deadline := time.Now().Add(abandonWait)
	for {
		ses.abandon(c)
		select {
		case <-c.done:
			select {
			case <-c.drained:
				return
			default:
			}
		default:
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// abandonWait bounds unblock.
const abandonWait = 10 * time.Second

func (tb *toolbox) command(r *http.Request) (*session, *sessionCommand, error) {
	ses, err := tb.session(r.PathValue("sid"))
	if err != nil {
		return nil, nil, err
	}
	ses.mu.Lock()
	defer ses.mu.Unlock()
	for _, c := range ses.cmds {
		if c.id == r.PathValue("cid") {
			return ses, c, nil
		}
	}
	return nil, nil, tbErr(http.StatusNotFound, "NOT_FOUND", "command %s not found in session %s", r.PathValue("cid"), ses.id)
}

// sessionExec is POST /process/session/{sid}/exec: 200 with the output
// once the command ends, or 202 {cmdId} at once when runAsync (or async).
func (tb *toolbox) sessionExec(w http.ResponseWriter, r *http.Request) error {
	ses, err := tb.session(r.PathValue("sid"))
	if err != nil {
		return err
	}
	var req struct {
		Command  string `json:"command"`
		RunAsync bool   `json:"runAsync"`
		Async    bool   `json:"async"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Command) == "" {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "command is required")
	}
	c, err := ses.exec(req.Command)
	if err != nil {
		return err
	}
	if req.RunAsync || req.Async {
		writeJSON(w, http.StatusAccepted, map[string]string{"cmdId": c.id})
		return nil
	}
	select {
	case <-c.done:
	case <-r.Context().Done():
		return r.Context().Err()
	}
	select { // the rest of the output, unless a background job holds it open
	case <-c.drained:
	case <-time.After(100 * time.Millisecond):
	}
	stdout, stderr, output := c.outputs()
	c.mu.Lock()
	exit := *c.exit
	c.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"cmdId": c.id, "output": string(output), "stdout": string(stdout), "stderr": string(stderr), "exitCode": exit})
	return nil
}

// cmdSeq numbers session commands (IDs unique across sessions).
var cmdSeq atomic.Int64

// exec queues command in the session's shell. The shell runs commands in
// order, so one queued behind a long-running one starts when it ends.
func (ses *session) exec(command string) (*sessionCommand, error) {
	ses.mu.Lock()
	defer ses.mu.Unlock()
	if ses.ended {
		return nil, tbErr(http.StatusGone, "SESSION_ENDED", "session %s has ended (its shell exited)", ses.id)
	}
	id := fmt.Sprintf("cmd-%d-%d", time.Now().UnixNano(), cmdSeq.Add(1))
	c := &sessionCommand{id: id, command: command, done: make(chan struct{}), drained: make(chan struct{}), notify: make(chan struct{})}
	base := filepath.Join(ses.dir, id)
	for _, ext := range []string{".out", ".err", ".exit"} {
		if err := unix.Mkfifo(base+ext, 0o600); err != nil {
			return nil, fmt.Errorf("session fifo: %w", err)
		}
		chown(base+ext, ses.acct)
	}
	var streams sync.WaitGroup
	for _, stderr := range []bool{false, true} {
		ext := ".out"
		if stderr {
			ext = ".err"
		}
		streams.Add(1)
		go func() {
			defer streams.Done()
			f, err := os.Open(base + ext) // blocks until the shell opens it
			if err != nil {
				return
			}
			defer f.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := f.Read(buf)
				if n > 0 {
					c.append(stderr, append([]byte(nil), buf[:n]...))
				}
				if err != nil {
					return
				}
			}
		}()
	}
	go func() {
		streams.Wait()
		close(c.drained)
		c.mu.Lock()
		close(c.notify)
		c.notify = make(chan struct{})
		c.mu.Unlock()
	}()
	go func() {
		code, ok := -1, false
		if b, err := os.ReadFile(base + ".exit"); err == nil {
			code, err = strconv.Atoi(strings.TrimSpace(string(b)))
			ok = err == nil
		}
		if !ok { // the shell ended first: its status is the command's
			<-ses.shell.done
			code = ses.shell.exitCode()
		}
		c.mu.Lock()
		c.exit = &code
		close(c.notify)
		c.notify = make(chan struct{})
		c.mu.Unlock()
		close(c.done)
		// The FIFOs' names go once the command ended; readers a
		// background job still holds open keep reading until it closes
		// them.
		time.AfterFunc(200*time.Millisecond, func() { removeFIFOs(base) })
	}()
	// The group runs in the shell itself (cd and exports persist); stdin
	// is /dev/null so a command never reads the shell's script.
	script := fmt.Sprintf("{ %s\n} </dev/null >%s 2>%s; echo $? >%s\n", command, base+".out", base+".err", base+".exit")
	if _, err := ses.shell.stdin.Write([]byte(script)); err != nil {
		ses.abandon(c)
		return nil, tbErr(http.StatusGone, "SESSION_ENDED", "session %s has ended: %v", ses.id, err)
	}
	ses.cmds = append(ses.cmds, c)
	return c, nil
}

// removeFIFOs removes a command's FIFOs.
func removeFIFOs(base string) {
	for _, ext := range []string{".out", ".err", ".exit"} {
		os.Remove(base + ext)
	}
}

func (tb *toolbox) getCommand(w http.ResponseWriter, r *http.Request) error {
	_, c, err := tb.command(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c.view())
	return nil
}

// commandLogs is GET …/logs: the output so far as JSON, or with
// follow=true over a WebSocket, every chunk as a binary frame behind its
// stdout/stderr marker, closed normally once the command ended and its
// output was sent.
func (tb *toolbox) commandLogs(w http.ResponseWriter, r *http.Request) error {
	_, c, err := tb.command(r)
	if err != nil {
		return err
	}
	if r.URL.Query().Get("follow") != "true" || !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		stdout, stderr, output := c.outputs()
		writeJSON(w, http.StatusOK, map[string]string{"output": string(output), "stdout": string(stdout), "stderr": string(stderr)})
		return nil
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil // Accept answered
	}
	defer conn.CloseNow()
	ctx := conn.CloseRead(r.Context())
	next := 0
	send := func() error {
		chunks, _, _ := c.snapshot(next)
		for _, ch := range chunks {
			mark := markStdout
			if ch.stderr {
				mark = markStderr
			}
			if err := conn.Write(ctx, websocket.MessageBinary, append(append([]byte(nil), mark...), ch.data...)); err != nil {
				return err
			}
		}
		next += len(chunks)
		return nil
	}
	done := c.done
	var linger <-chan time.Time // runs once the command ended
	for {
		_, changed, complete := c.snapshot(next)
		if err := send(); err != nil {
			return nil
		}
		if complete {
			conn.Close(websocket.StatusNormalClosure, "")
			return nil
		}
		select {
		case <-changed:
		case <-done:
			// A background job may keep the streams open: the log ends a
			// moment after the command did.
			done, linger = nil, time.After(200*time.Millisecond)
		case <-linger:
			if send() == nil {
				conn.Close(websocket.StatusNormalClosure, "")
			}
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

func (tb *toolbox) commandInput(w http.ResponseWriter, r *http.Request) error {
	if _, _, err := tb.command(r); err != nil {
		return err
	}
	return tbErr(http.StatusBadRequest, "BAD_REQUEST", "sending input to session commands is not supported by Platinum (their stdin is /dev/null); use a PTY for interactive programs")
}
