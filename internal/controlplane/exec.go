package controlplane

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// ExecRequest runs one command in a sandbox.
type ExecRequest struct {
	// Argv is the command; a shell string arrives as ["/bin/sh","-c",s].
	Argv    []string
	Env     map[string]string
	Cwd     string
	Stdin   []byte
	Timeout time.Duration
	// OnStart, when set, receives the command's pid once it runs, before
	// any output.
	OnStart func(pid uint32)
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode int
	TimedOut bool
	Duration time.Duration
}

// MaxExecTimeout caps one command's timeout.
const MaxExecTimeout = 24 * time.Hour

// RunningAgent returns a running sandbox p may reach and the client of its
// agent, marking the sandbox active (the parts that work inside sandboxes,
// such as artifacts, reach them through it). A sandbox in another state is
// a StateError.
func (s *Service) RunningAgent(ctx context.Context, p Principal, id string) (sandbox.Sandbox, *agentclient.Client, error) {
	sb, err := s.Get(ctx, p, id, false)
	if err != nil {
		return sandbox.Sandbox{}, nil, err
	}
	if sb.State != sandbox.StateRunning {
		return sb, nil, &StateError{State: sb.State}
	}
	s.Touch(id)
	return sb, s.agent(sb.ID, sb.Address, sb.AgentToken), nil
}

// StateError says an operation needs another state than the sandbox has.
type StateError struct {
	State sandbox.State
	// Want names the states the operation needs; empty means running.
	Want string
}

func (e *StateError) Error() string {
	if e.Want != "" {
		return fmt.Sprintf("sandbox is %s; this needs it %s", e.State, e.Want)
	}
	return fmt.Sprintf("sandbox is %s; it must be running (wait with ?wait_for_state=running, or start it)", e.State)
}

// Unwrap makes errors.Is(err, sandbox.ErrConflict) hold.
func (e *StateError) Unwrap() error { return sandbox.ErrConflict }

// Exec runs a command and streams its output to the callbacks. A command
// that outlives its timeout is killed and reported with TimedOut.
func (s *Service) Exec(ctx context.Context, p Principal, id string, r ExecRequest, stdout, stderr func([]byte)) (ExecResult, error) {
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return ExecResult{}, &sandbox.FieldError{Field: "cmd", Reason: "must be a non-empty argv array or shell string"}
	}
	if r.Timeout < 0 || r.Timeout > MaxExecTimeout {
		return ExecResult{}, &sandbox.FieldError{Field: "timeout_ms", Reason: "must be positive and at most 24 hours"}
	}
	if err := ValidateEnv(r.Env); err != nil {
		return ExecResult{}, err
	}
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return ExecResult{}, err
	}
	// Status running while the command is in flight; its end is activity.
	done := s.busy.Start(id)
	defer s.Touch(id)
	defer done()
	start := time.Now()
	res, err := ag.Exec(ctx, agentclient.ExecRequest{
		Cmd: r.Argv[0], Args: r.Argv[1:], Env: r.Env, Cwd: r.Cwd, Stdin: r.Stdin, Timeout: r.Timeout,
		OnStart: r.OnStart,
	}, stdout, stderr)
	if err != nil {
		return ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	return ExecResult{ExitCode: res.Code, TimedOut: res.TimedOut, Duration: time.Since(start)}, nil
}

// FileEntry describes one file of a directory listing.
type FileEntry = agentclient.Entry

// Download opens a file for reading, or lists a directory (entries set,
// reader nil).
func (s *Service) Download(ctx context.Context, p Principal, id, path string) (io.ReadCloser, []FileEntry, error) {
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return nil, nil, err
	}
	st, err := ag.Stat(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	if st.Type == "dir" {
		entries, err := ag.ListDir(ctx, path, 1)
		return nil, entries, err
	}
	rc, err := ag.Download(ctx, path)
	return rc, nil, err
}

// Upload streams r into path, creating parent directories.
func (s *Service) Upload(ctx context.Context, p Principal, id, path string, r io.Reader) error {
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return err
	}
	if err := s.EnsureSpace(0); err != nil {
		return err
	}
	return ag.Upload(ctx, path, r)
}

// RemoveFile removes a file or directory tree.
func (s *Service) RemoveFile(ctx context.Context, p Principal, id, path string) error {
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return err
	}
	return ag.Remove(ctx, path)
}

// MakeDir creates a directory with parents; created is false when it
// existed already.
func (s *Service) MakeDir(ctx context.Context, p Principal, id, path string) (created bool, err error) {
	_, ag, err := s.RunningAgent(ctx, p, id)
	if err != nil {
		return false, err
	}
	return ag.MakeDir(ctx, path)
}

// agent returns a cached client for the sandbox's pt-agent. Each client
// has its own connection pool: pools keyed by address alone (one shared
// transport) handed a connection kept to a deleted sandbox's agent to the
// next sandbox given its address, and a request that cannot be retried
// (the /etc/pt-env upload at boot, an exec) failed with a reset.
func (s *Service) agent(id, addr, token string) *agentclient.Client {
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	key := id + "@" + addr
	if c, ok := s.agents[key]; ok {
		return c
	}
	c := agentclient.NewOwnPool("http://"+net.JoinHostPort(addr, strconv.Itoa(AgentPort)), token)
	s.agents[key] = c
	return c
}

// forgetAgent drops the sandbox's agent clients and their kept
// connections (it stopped, moved or went away).
func (s *Service) forgetAgent(id string) { s.dropAgents(id, nil) }

// abortAgent drops the sandbox's agent clients and ends their calls in
// flight with an error wrapping cause (the sandbox was killed outright:
// nothing in it will answer or close a connection).
func (s *Service) abortAgent(id string, cause error) { s.dropAgents(id, cause) }

func (s *Service) dropAgents(id string, cause error) {
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	for k, c := range s.agents {
		if strings.HasPrefix(k, id+"@") {
			if cause != nil {
				c.Abort(cause)
			} else {
				c.CloseIdleConnections()
			}
			delete(s.agents, k)
		}
	}
}
