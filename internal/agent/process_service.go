package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/api/gen/process"
	"github.com/platinum-dev/platinum/api/gen/process/processconnect"
)

// processService is the thin Connect shim of process.Process.
type processService struct{ s *Server }

var _ processconnect.ProcessHandler = (*processService)(nil)

func (ps *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	s := ps.s
	sp, err := s.spawnSpec(req.Header(), req.Msg)
	if err != nil {
		return rpcError(err)
	}
	p, sub, err := s.start(sp)
	if err != nil {
		return rpcError(err)
	}
	s.log.Debug("process started", "pid", p.pid, "cmd", sp.path, "user", sp.acct.name)
	send := func(ev *process.ProcessEvent) error { return stream.Send(&process.StartResponse{Event: ev}) }
	return s.serveEvents(ctx, p, sub, req.Header(), send, true)
}

func (ps *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	p, err := ps.s.procs.get(req.Msg.GetProcess())
	if err != nil {
		return rpcError(err)
	}
	sub := p.subscribe()
	send := func(ev *process.ProcessEvent) error { return stream.Send(&process.ConnectResponse{Event: ev}) }
	return ps.s.serveEvents(ctx, p, sub, req.Header(), send, false)
}

// serveEvents streams start{pid}, the process's events and its end. When the
// call's deadline (Connect-Timeout-Ms) passes first, a Start stream kills
// the process: the SDK's timeoutMs bounds the command's whole lifetime. A
// client that merely disconnects leaves the process running (background
// commands, re-attach with Connect).
func (s *Server) serveEvents(ctx context.Context, p *proc, sub *subscriber, h http.Header, send func(*process.ProcessEvent) error, killOnDeadline bool) error {
	defer p.unsubscribe(sub)
	if err := send(startEvent(p, wantsExtensions(h))); err != nil {
		// The client gave up before even the start reached it: a Start
		// whose deadline passed still must not leave its process running.
		if killOnDeadline && ctx.Err() != nil && deadlinePassed(ctx, deadlineSlack) {
			p.signal(unix.SIGKILL)
		}
		return err
	}
	keepalive, stop := keepaliveTicker(h)
	defer stop()
	for {
		select {
		case ev := <-sub.ch:
			if err := send(ev); err != nil {
				return err
			}
			if ev.GetEnd() != nil {
				return nil
			}
		case <-keepalive:
			if err := send(keepaliveEvent()); err != nil {
				return err
			}
		case <-ctx.Done():
			if !deadlinePassed(ctx, deadlineSlack) {
				return connect.NewError(connect.CodeCanceled, ctx.Err())
			}
			if killOnDeadline {
				if err := p.signal(unix.SIGKILL); err == nil {
					s.log.Info("process killed: stream deadline passed", "pid", p.pid)
				}
			}
			return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("process %d: stream deadline exceeded", p.pid))
		}
	}
}

// deadlineSlack: a client whose stream ends this close to the deadline is
// taken to have hit it. The client's timer starts first and usually closes
// the connection a few milliseconds before the agent's own copy of the
// deadline fires; without the slack such a command would survive its
// timeout.
const deadlineSlack = time.Second

// deadlinePassed reports whether ctx ended because of (or within slack of)
// its deadline rather than an early disconnect.
func deadlinePassed(ctx context.Context, slack time.Duration) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < slack
}

// spawnSpec validates a StartRequest and resolves user, env, cwd and binary.
func (s *Server) spawnSpec(h http.Header, req *process.StartRequest) (spawnSpec, error) {
	cfg := req.GetProcess()
	if cfg.GetCmd() == "" {
		return spawnSpec{}, fmt.Errorf("process.cmd: empty: %w", errInvalid)
	}
	acct, err := s.accountFor(h)
	if err != nil {
		return spawnSpec{}, err
	}
	envs := cfg.GetEnvs()
	if req.Pty != nil {
		if _, ok := envs["TERM"]; !ok {
			envs = mapWith(envs, "TERM", "xterm-256color")
		}
	}
	env := buildEnv(acct, s.sandboxEnv(), envs)
	dir, err := s.workdir(acct, cfg.Cwd)
	if err != nil {
		return spawnSpec{}, err
	}
	path, err := lookPath(cfg.GetCmd(), env)
	if err != nil {
		return spawnSpec{}, err
	}
	return spawnSpec{
		path:    path,
		argv:    append([]string{cfg.GetCmd()}, cfg.GetArgs()...),
		env:     env,
		dir:     dir,
		acct:    acct,
		pty:     req.Pty,
		stdin:   req.Stdin == nil || *req.Stdin, // absent means true (envd)
		tag:     req.Tag,
		cfg:     cfg,
		timeout: time.Duration(req.GetTimeoutMs()) * time.Millisecond,
	}, nil
}

// workdir resolves the requested cwd, else /init's defaultWorkdir, else the
// user's home (or / when the home does not exist).
func (s *Server) workdir(acct *account, cwd *string) (string, error) {
	if cwd == nil || *cwd == "" {
		_, def := s.defaults()
		if def != "" {
			if fi, err := os.Stat(def); err == nil && fi.IsDir() {
				return def, nil
			}
		}
		if fi, err := os.Stat(acct.home); err == nil && fi.IsDir() {
			return acct.home, nil
		}
		return "/", nil
	}
	dir, err := resolvePath(*cwd, acct.home)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("cwd %q: not an existing directory: %w", dir, errInvalid)
	}
	return dir, nil
}

func mapWith(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for mk, mv := range m {
		out[mk] = mv
	}
	out[k] = v
	return out
}

func (ps *processService) List(_ context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	resp := &process.ListResponse{}
	ext := wantsExtensions(req.Header())
	for _, p := range ps.s.procs.running() {
		info := &process.ProcessInfo{Config: p.cfg, Pid: uint32(p.pid), Tag: p.tag}
		if ext {
			info.Pty, info.Cwd, info.Stdin = p.master != nil, p.dir, p.stdin != nil
		}
		resp.Processes = append(resp.Processes, info)
	}
	return connect.NewResponse(resp), nil
}

func (ps *processService) Update(_ context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	p, err := ps.s.procs.get(req.Msg.GetProcess())
	if err != nil {
		return nil, rpcError(err)
	}
	if req.Msg.Pty != nil {
		if err := p.resize(req.Msg.Pty.GetSize()); err != nil {
			return nil, rpcError(err)
		}
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

func (ps *processService) StreamInput(_ context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	var p *proc
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *process.StreamInputRequest_Start:
			found, err := ps.s.procs.get(ev.Start.GetProcess())
			if err != nil {
				return nil, rpcError(err)
			}
			p = found
		case *process.StreamInputRequest_Data:
			if p == nil {
				return nil, rpcError(fmt.Errorf("input before start event: %w", errInvalid))
			}
			if err := p.write(ev.Data.GetInput()); err != nil {
				return nil, rpcError(err)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

func (ps *processService) SendInput(_ context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	p, err := ps.s.procs.get(req.Msg.GetProcess())
	if err != nil {
		return nil, rpcError(err)
	}
	if err := p.write(req.Msg.GetInput()); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (ps *processService) SendSignal(_ context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	sig := unix.Signal(req.Msg.GetSignal())
	if !slices.Contains(sendableSignals, sig) {
		return nil, rpcError(fmt.Errorf("signal %v: unsupported: %w", req.Msg.GetSignal(), errInvalid))
	}
	p, err := ps.s.procs.get(req.Msg.GetProcess())
	if err != nil {
		return nil, rpcError(err)
	}
	if err := p.signal(sig); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (ps *processService) CloseStdin(_ context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	p, err := ps.s.procs.get(req.Msg.GetProcess())
	if err != nil {
		return nil, rpcError(err)
	}
	if err := p.closeStdin(); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// sendableSignals are the signals SendSignal delivers. The wire enum names
// SIGTERM and SIGKILL only (envd's); the others arrive as open enum values
// holding their Linux numbers.
var sendableSignals = []unix.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGKILL, unix.SIGUSR1, unix.SIGUSR2,
	unix.SIGTERM, unix.SIGCONT, unix.SIGSTOP, unix.SIGTSTP,
}

// keepaliveTicker ticks every Keepalive-Ping-Interval seconds when the
// client asked for keepalive events (the e2b SDK sends 50), else never.
func keepaliveTicker(h http.Header) (<-chan time.Time, func()) {
	secs, err := strconv.Atoi(h.Get(headerKeepalive))
	if err != nil || secs <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(time.Duration(secs) * time.Second)
	return t.C, t.Stop
}
