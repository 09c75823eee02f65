// Package agentclient is the host side of the pt-agent channel: ptd uses it
// to wait for a sandbox's agent, initialise it, run commands and move files.
// It speaks the same envd-compatible protocol as the e2b SDK (generated
// Connect clients plus the plain /files, /health and /init endpoints), and
// returns errors wrapping internal/sandbox categories so callers can branch
// with errors.Is.
package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/platinum-dev/platinum/api/gen/filesystem"
	"github.com/platinum-dev/platinum/api/gen/filesystem/filesystemconnect"
	"github.com/platinum-dev/platinum/api/gen/process"
	"github.com/platinum-dev/platinum/api/gen/process/processconnect"
	"github.com/platinum-dev/platinum/internal/agent/envscript"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/upstream"
)

// ErrNoSpace reports that the sandbox's disk is full (agent ENOSPC: HTTP
// 507 or resource_exhausted). It is distinct from the sandbox categories
// because callers usually tell the user to grow the disk.
var ErrNoSpace = errors.New("no space left on sandbox disk")

// Client talks to one pt-agent. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	hc    *http.Client
	proc  processconnect.ProcessClient
	fs    filesystemconnect.FilesystemClient
	conns *upstream.Conns // NewOwnPool's, for Abort
}

// New returns a client for the agent at baseURL (e.g. "http://10.0.0.2:49983")
// that authenticates with token. hc nil means http.DefaultClient; streams
// can be long, so hc should have no overall Timeout.
func New(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	base := strings.TrimRight(baseURL, "/")
	opts := connect.WithInterceptors(tokenInterceptor(token))
	return &Client{
		base:  base,
		token: token,
		hc:    hc,
		proc:  processconnect.NewProcessClient(hc, base, opts),
		fs:    filesystemconnect.NewFilesystemClient(hc, base, opts),
	}
}

// NewOwnPool is New with an HTTP transport of the client's own, so its kept
// connections serve only this client: a pool shared by address would hand
// a connection kept to one sandbox's agent to the next sandbox given the
// same address. Close them with CloseIdleConnections when done, or end
// every call at once with Abort.
func NewOwnPool(baseURL, token string) *Client {
	// DefaultTransport's settings when it is still the standard one (a
	// test may have wrapped it); a plain transport otherwise.
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		base = &http.Transport{}
	}
	tr := base.Clone()
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	set := &upstream.Conns{}
	tr.DialContext = set.Dial(dial)
	c := New(baseURL, token, &http.Client{Transport: tr})
	c.conns = set
	return c
}

// Abort ends the client's calls in flight and fails its later ones, all
// with an error wrapping cause: the sandbox is gone and will not answer.
// Only a client made by NewOwnPool can; on another it only closes the
// idle connections.
func (c *Client) Abort(cause error) {
	if c.conns != nil {
		c.conns.Abort(cause)
	}
	c.hc.CloseIdleConnections()
}

// CloseIdleConnections closes the connections the client's HTTP client
// keeps (meant for a client with a transport of its own, NewOwnPool).
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Health returns nil when the agent answers GET /health with 204.
func (c *Client) Health(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/health", nil)
	if err != nil {
		return fmt.Errorf("agent health: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return transportErr(ctx, "agent health", err)
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("agent health: status %d: %w", resp.StatusCode, sandbox.ErrUnavailable)
	}
	return nil
}

// CodeReady returns nil once the sandbox's code-interpreter server has its
// default kernel up, or at once when its template has none (GET
// /code/ready, which waits while the server starts).
func (c *Client) CodeReady(ctx context.Context) error {
	resp, err := c.do(ctx, http.MethodGet, "/code/ready", nil, "", nil)
	if err != nil {
		return fmt.Errorf("agent code ready: %w", err)
	}
	drain(resp.Body)
	return nil
}

// WaitReady polls /health until the agent answers or ctx is done (then it
// returns an error wrapping sandbox.ErrUnavailable and ctx.Err()), every
// readyPoll of the time waited so far.
func (c *Client) WaitReady(ctx context.Context) error {
	start := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Health(attempt)
		cancel()
		if err == nil {
			return nil
		}
		t.Reset(readyPoll(time.Since(start)))
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent wait ready: %w (%w; last: %v)", sandbox.ErrUnavailable, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// readyPoll is the pause before the next /health poll of an agent waited
// for since waited: 2 ms while a boot is quick (a gVisor agent answers
// some 30 ms after its container starts on a quiet host), then a
// sixteenth of the wait so far, up to 16 ms, which delays the answer by
// at most that part. Each failed poll is a connection the host, and the
// booting sandbox's own network stack on the core its agent boots on,
// turn away: at a steady 2 ms, 50 creates at once sent about 1,000 per
// boot, a few percent of ptd's own CPU time (a perf profile of the burst
// bench).
func readyPoll(waited time.Duration) time.Duration {
	return min(max(waited/16, 2*time.Millisecond), 16*time.Millisecond)
}

// Init replaces the sandbox-level environment every later process gets
// (POST /init).
func (c *Client) Init(ctx context.Context, env map[string]string) error {
	return c.InitWith(ctx, InitRequest{Env: env})
}

// InitRequest is what POST /init sets.
type InitRequest struct {
	// Env replaces the environment every later process gets.
	Env map[string]string
	// User and Workdir, when set, are who later processes run as and
	// where, when a call names neither (a template's USER and WORKDIR). A
	// user may be a name, a uid, or either with ":group".
	User, Workdir string
	// EnvScript has the agent rewrite /etc/pt-env (envscript.Path) from
	// Env in the same round trip.
	EnvScript bool
}

// InitWith sets the environment and, when given, the default user and
// working directory (POST /init). An unknown user is an error wrapping
// sandbox.ErrInvalidArgument.
func (c *Client) InitWith(ctx context.Context, r InitRequest) error {
	env := r.Env
	if env == nil {
		env = map[string]string{}
	}
	req := map[string]any{"envVars": env}
	if r.User != "" {
		req["defaultUser"] = r.User
	}
	if r.Workdir != "" {
		req["defaultWorkdir"] = r.Workdir
	}
	if r.EnvScript {
		req["envScript"] = true
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("agent init: %w", err)
	}
	// A dial refused or unanswered right after a boot or restore (the
	// guest's network coming up under a loaded host: bench saw "no route
	// to host" on a clone from a gVisor memory snapshot) is sent again
	// for a while; /init sets the whole state, so a repeat is harmless.
	deadline := time.Now().Add(initRedial)
	for {
		resp, err := c.doIdempotent(ctx, http.MethodPost, "/init", "application/json", bytes.NewReader(body))
		if err == nil {
			drain(resp.Body)
			if !r.EnvScript || resp.Header.Get(envscript.Header) == "written" {
				return nil
			}
			// An agent older than envScript ignored it.
			return c.Upload(ctx, envscript.Path, strings.NewReader(envscript.Render(env)))
		}
		if !dialFailed(err) || time.Now().After(deadline) {
			return fmt.Errorf("agent init: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent init: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// initRedial is how long Init dials again after a dial failed.
const initRedial = 5 * time.Second

// dialFailed reports whether err is a failure to connect at all (nothing
// was sent).
func dialFailed(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH)
}

// ExecRequest describes one command run by Exec.
type ExecRequest struct {
	// Cmd is the program; without a slash it is looked up on the child's PATH.
	Cmd  string
	Args []string
	// Env is layered over the agent defaults and the Init environment.
	Env map[string]string
	// Cwd defaults to the user's home.
	Cwd string
	// Stdin, when non-nil, is written to the process and then closed; nil
	// gives the process /dev/null.
	Stdin []byte
	// Timeout, when positive, bounds the whole run; when it passes the
	// process is killed and Exec returns a result with TimedOut set (and a
	// nil error).
	Timeout time.Duration
	// OnStart, when set, is called with the process's pid once it runs,
	// before any output (streaming clients announce the start).
	OnStart func(pid uint32)
}

// ExitResult is how a process ended.
type ExitResult struct {
	// Code is the exit status, or -1 when the process was killed by a signal.
	Code int
	// Signaled is true when a signal ended the process.
	Signaled bool
	// Status reads like "exit status 3" or "signal: killed".
	Status string
	// TimedOut is true when ExecRequest.Timeout passed and the process was
	// killed (Code -1, Signaled true).
	TimedOut bool
}

// timedOutResult is a command's result when its timeout passed: killed.
var timedOutResult = ExitResult{Code: -1, Signaled: true, Status: "signal: killed", TimedOut: true}

// Exec runs a command to completion, calling onStdout/onStderr (either may
// be nil) with each chunk of output as it arrives, and returns its exit.
// A non-zero exit and a timeout are results, not errors. If ctx ends first,
// the process is killed and the error wraps ctx.Err().
func (c *Client) Exec(ctx context.Context, req ExecRequest, onStdout, onStderr func([]byte)) (ExitResult, error) {
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if req.Timeout > 0 {
		sctx, cancel = context.WithTimeout(ctx, req.Timeout)
	}
	defer cancel()
	withStdin := req.Stdin != nil
	cfg := &process.ProcessConfig{Cmd: req.Cmd, Args: req.Args, Envs: req.Env}
	if req.Cwd != "" {
		cfg.Cwd = &req.Cwd
	}
	// timedOut: the command's own timeout passed, not the caller's ctx.
	timedOut := func(err error) bool {
		return req.Timeout > 0 && ctx.Err() == nil &&
			(sctx.Err() != nil || connect.CodeOf(err) == connect.CodeDeadlineExceeded)
	}
	stream, err := c.proc.Start(sctx, connect.NewRequest(&process.StartRequest{Process: cfg, Stdin: &withStdin}))
	if err == nil && !stream.Receive() {
		err = orEOF(stream.Err())
		stream.Close()
	}
	if err != nil {
		// A timeout that passes before the process's start reaches us (a
		// host so busy the agent answers late) is still the command's
		// timeout: the agent kills a process whose deadline passed.
		if timedOut(err) {
			return timedOutResult, nil
		}
		return ExitResult{}, rpcErr(sctx, "agent exec", err)
	}
	defer stream.Close()
	start := stream.Msg().GetEvent().GetStart()
	if start == nil {
		return ExitResult{}, fmt.Errorf("agent exec: first event is not start: %w", sandbox.ErrUnavailable)
	}
	pid := start.GetPid()
	if req.OnStart != nil {
		req.OnStart(pid)
	}
	stdinDone := make(chan struct{})
	if withStdin {
		go func() {
			defer close(stdinDone)
			c.feedStdin(sctx, pid, req.Stdin) // errors surface as the process's own result
		}()
	} else {
		close(stdinDone)
	}
	defer func() { <-stdinDone }()
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		switch {
		case ev.GetData() != nil:
			d := ev.GetData()
			if b := d.GetStdout(); b != nil && onStdout != nil {
				onStdout(b)
			}
			if b := d.GetStderr(); b != nil && onStderr != nil {
				onStderr(b)
			}
			if b := d.GetPty(); b != nil && onStdout != nil {
				onStdout(b)
			}
		case ev.GetEnd() != nil:
			end := ev.GetEnd()
			return ExitResult{Code: int(end.GetExitCode()), Signaled: !end.GetExited(), Status: end.GetStatus()}, nil
		}
	}
	streamErr := stream.Err()
	expired := timedOut(streamErr)
	if sctx.Err() != nil || expired {
		// The caller gave up or the timeout passed: do not leave the
		// command running in the sandbox (the agent kills it too when it
		// sees the deadline; this covers a connection dropped earlier).
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = c.Kill(kctx, pid)
		kcancel()
	}
	if expired {
		return timedOutResult, nil
	}
	return ExitResult{}, rpcErr(ctx, "agent exec", orEOF(streamErr))
}

func (c *Client) feedStdin(ctx context.Context, pid uint32, data []byte) {
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	const chunk = 64 << 10
	for len(data) > 0 {
		n := min(chunk, len(data))
		in := &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: data[:n]}}
		if _, err := c.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: in})); err != nil {
			return
		}
		data = data[n:]
	}
	_, _ = c.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel}))
}

// Kill sends SIGKILL to a process the agent started (and its process
// group). It returns an error wrapping sandbox.ErrNotFound if the process
// has already exited or never existed.
func (c *Client) Kill(ctx context.Context, pid uint32) error {
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	_, err := c.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: process.Signal_SIGNAL_SIGKILL}))
	if err != nil {
		return rpcErr(ctx, "agent kill", err)
	}
	return nil
}

// Upload streams r into path inside the sandbox (parents created, file
// replaced) without buffering it. ErrNoSpace when the disk is full.
func (c *Client) Upload(ctx context.Context, path string, r io.Reader) error {
	q := url.Values{"path": {path}}
	resp, err := c.do(ctx, http.MethodPost, "/files", q, "application/octet-stream", r)
	if err != nil {
		return fmt.Errorf("agent upload %s: %w", path, err)
	}
	drain(resp.Body)
	return nil
}

// ExtractTar unpacks the tar stream r below the absolute directory dir
// inside the sandbox (POST /files/tar); owner, when set ("user[:group]",
// names or ids), owns every entry. It returns how many entries it wrote.
func (c *Client) ExtractTar(ctx context.Context, dir, owner string, r io.Reader) (int, error) {
	q := url.Values{"path": {dir}}
	if owner != "" {
		q.Set("owner", owner)
	}
	resp, err := c.do(ctx, http.MethodPost, "/files/tar", q, "application/x-tar", r)
	if err != nil {
		return 0, fmt.Errorf("agent extract into %s: %w", dir, err)
	}
	defer drain(resp.Body)
	var out struct {
		Files int `json:"files"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("agent extract into %s: %w", dir, err)
	}
	return out.Files, nil
}

// Download opens path inside the sandbox for reading; the caller closes
// the stream. sandbox.ErrNotFound when it does not exist,
// sandbox.ErrInvalidArgument when it is a directory.
func (c *Client) Download(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, "/files", url.Values{"path": {path}}, "", nil)
	if err != nil {
		return nil, fmt.Errorf("agent download %s: %w", path, err)
	}
	return resp.Body, nil
}

// Entry describes a file, directory or symlink inside the sandbox.
type Entry struct {
	Name string
	// Path is absolute.
	Path string
	// Type is "file", "dir" or "symlink".
	Type        string
	Size        int64
	Mode        fs.FileMode
	Permissions string
	Owner       string
	Group       string
	ModTime     time.Time
	// SymlinkTarget is set for symlinks only.
	SymlinkTarget string
}

// IsDir reports whether the entry is a directory.
func (e Entry) IsDir() bool { return e.Type == "dir" }

func entryFrom(e *filesystem.EntryInfo) Entry {
	out := Entry{
		Name:          e.GetName(),
		Path:          e.GetPath(),
		Size:          e.GetSize(),
		Mode:          fs.FileMode(e.GetMode()),
		Permissions:   e.GetPermissions(),
		Owner:         e.GetOwner(),
		Group:         e.GetGroup(),
		SymlinkTarget: e.GetSymlinkTarget(),
	}
	if e.GetModifiedTime() != nil {
		out.ModTime = e.GetModifiedTime().AsTime()
	}
	switch e.GetType() {
	case filesystem.FileType_FILE_TYPE_DIRECTORY:
		out.Type = "dir"
	case filesystem.FileType_FILE_TYPE_SYMLINK:
		out.Type = "symlink"
	default:
		out.Type = "file"
	}
	return out
}

// Stat describes path (not following a final symlink); sandbox.ErrNotFound
// when it does not exist.
func (c *Client) Stat(ctx context.Context, path string) (Entry, error) {
	resp, err := c.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: path}))
	if err != nil {
		return Entry{}, rpcErr(ctx, "agent stat "+path, err)
	}
	return entryFrom(resp.Msg.GetEntry()), nil
}

// ListDir lists path's entries down to depth levels (1 = direct children);
// sandbox.ErrNotFound when it does not exist, sandbox.ErrInvalidArgument
// when it is not a directory.
func (c *Client) ListDir(ctx context.Context, path string, depth int) ([]Entry, error) {
	if depth < 1 {
		depth = 1
	}
	resp, err := c.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: path, Depth: uint32(depth)}))
	if err != nil {
		return nil, rpcErr(ctx, "agent list "+path, err)
	}
	out := make([]Entry, 0, len(resp.Msg.GetEntries()))
	for _, e := range resp.Msg.GetEntries() {
		out = append(out, entryFrom(e))
	}
	return out, nil
}

// MakeDir creates path and its parents. created is false (and err nil)
// when the directory already existed; a non-directory in the way is
// sandbox.ErrInvalidArgument.
func (c *Client) MakeDir(ctx context.Context, path string) (created bool, err error) {
	if _, err := c.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: path})); err != nil {
		if connect.CodeOf(err) == connect.CodeAlreadyExists {
			return false, nil
		}
		return false, rpcErr(ctx, "agent mkdir "+path, err)
	}
	return true, nil
}

// Remove deletes path recursively; sandbox.ErrNotFound when it does not exist.
func (c *Client) Remove(ctx context.Context, path string) error {
	if _, err := c.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: path})); err != nil {
		return rpcErr(ctx, "agent remove "+path, err)
	}
	return nil
}

// do sends a plain HTTP request with the token and turns a non-2xx answer
// into a categorized error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, contentType string, body io.Reader) (*http.Response, error) {
	return c.send(ctx, method, path, q, contentType, body, false)
}

// doIdempotent is do for a request that may be sent twice (/init sets
// the whole environment). net/http then retries it on a fresh connection
// when a pooled one turns out dead: an address a deleted sandbox had is
// handed to the next, and the host's idle connection to the old one is
// answered with a reset by the new one.
func (c *Client) doIdempotent(ctx context.Context, method, path, contentType string, body io.Reader) (*http.Response, error) {
	return c.send(ctx, method, path, nil, contentType, body, true)
}

func (c *Client) send(ctx context.Context, method, path string, q url.Values, contentType string, body io.Reader, idempotent bool) (*http.Response, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Access-Token", c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if idempotent {
		req.Header["Idempotency-Key"] = nil // marks it for net/http; not sent
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, transportErr(ctx, "", err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer drain(resp.Body)
	if unreadRequest(resp.StatusCode, resp.Header) {
		return nil, fmt.Errorf("%w: %s", sandbox.ErrUnavailable, unreadMsg)
	}
	var eb struct {
		Message string `json:"message"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &eb) == nil && eb.Message != "" {
		msg = eb.Message
	}
	return nil, fmt.Errorf("%s: %w", msg, statusCategory(resp.StatusCode))
}

// unreadMsg says what an unreadRequest answer means to the caller.
const unreadMsg = "the agent could not read the request, so nothing ran; retry"

// unreadRequest reports whether an answer is the agent's HTTP server
// refusing a request it could not parse: a 400 in plain text, never in the
// JSON (or Connect end-of-stream) every handler of pt-agent answers with.
// No handler ran, so the call is safe to repeat and the caller's request
// was not at fault: it is unavailability, not bad input. bench/load saw
// such answers under heavy load (docs/ARCHITECTURE.md, "Calls into a
// sandbox under load").
func unreadRequest(status int, h http.Header) bool {
	ct, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return status == http.StatusBadRequest && ct == "text/plain"
}

func statusCategory(status int) error {
	switch status {
	case http.StatusBadRequest:
		return sandbox.ErrInvalidArgument
	case http.StatusUnauthorized:
		return sandbox.ErrUnauthenticated
	case http.StatusForbidden:
		return sandbox.ErrForbidden
	case http.StatusNotFound:
		return sandbox.ErrNotFound
	case http.StatusConflict:
		return sandbox.ErrConflict
	case http.StatusInsufficientStorage:
		return ErrNoSpace
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return sandbox.ErrUnavailable
	}
	return fmt.Errorf("agent answered status %d", status)
}

// rpcErr maps a Connect error to a categorized one.
func rpcErr(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", op, ctxErr)
	}
	if cause := upstream.AbortCause(err); cause != nil {
		return fmt.Errorf("%s: %w", op, cause)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) || brokenConn(err) {
		return transportErr(ctx, op, err)
	}
	if ce.Code() == connect.CodeInternal && (ce.Message() == "HTTP status 400 Bad Request" || ce.Message() == "400 Bad Request") {
		// connect-go's words for a plain 400 on a stream and on a unary
		// call: the answer unreadRequest describes (connect-go keeps no
		// headers of it to look at). pt-agent's Connect handlers answer
		// their own errors with a code, never in these words.
		return fmt.Errorf("%s: %w: %s", op, sandbox.ErrUnavailable, unreadMsg)
	}
	var cat error
	switch ce.Code() {
	case connect.CodeNotFound:
		cat = sandbox.ErrNotFound
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		cat = sandbox.ErrInvalidArgument
	case connect.CodeAlreadyExists:
		return fmt.Errorf("%s: %s: %w (%w)", op, ce.Message(), sandbox.ErrConflict, sandbox.ErrAlreadyExists)
	case connect.CodeUnavailable:
		cat = sandbox.ErrUnavailable
	case connect.CodeUnauthenticated:
		cat = sandbox.ErrUnauthenticated
	case connect.CodePermissionDenied:
		cat = sandbox.ErrForbidden
	case connect.CodeResourceExhausted:
		cat = ErrNoSpace
	case connect.CodeDeadlineExceeded:
		cat = context.DeadlineExceeded
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %s: %w", op, ce.Message(), cat)
}

// brokenConn reports whether err is the connection to the agent failing
// under a call (connect-go files a reset read as "canceled"): the agent
// crashed or its sandbox stopped, which is unavailability, not a bug.
func brokenConn(err error) bool {
	return dialFailed(err) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// transportErr classifies a failure to reach the agent at all.
func transportErr(ctx context.Context, op string, err error) error {
	if op != "" {
		op += ": "
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s%w", op, ctxErr)
	}
	if cause := upstream.AbortCause(err); cause != nil {
		return fmt.Errorf("%s%w", op, cause)
	}
	return fmt.Errorf("%s%w: %w", op, sandbox.ErrUnavailable, err)
}

func orEOF(err error) error {
	if err == nil {
		return fmt.Errorf("stream ended without an end event: %w", io.ErrUnexpectedEOF)
	}
	return err
}

func drain(rc io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(rc, 1<<20))
	rc.Close()
}

// headerExtensions asks pt-agent for Platinum's extension fields (process
// cwd, pty and stdin in List and start events); see the agent's
// HeaderExtensions.
const headerExtensions = "Pt-Extensions"

// tokenInterceptor adds X-Access-Token (and headerExtensions) to every RPC.
type tokenInterceptor string

func (t tokenInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("X-Access-Token", string(t))
		req.Header().Set(headerExtensions, "1")
		return next(ctx, req)
	}
}

func (t tokenInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("X-Access-Token", string(t))
		conn.RequestHeader().Set(headerExtensions, "1")
		return conn
	}
}

func (t tokenInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
