package controlplane

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// ReadyError is a template's ready_cmd that did not pass in time: the
// sandbox ends failed with this as its reason.
type ReadyError struct {
	Timeout time.Duration
	// Last is the last attempt's outcome ("exit 1: connection refused").
	Last string
	// Answer is the last outcome the command itself gave (its exit status
	// and output) when the last attempt gave none, e.g. because the
	// deadline cut it: on a loaded host that is the common case, and the
	// command's own words are what says why it failed.
	Answer string
}

func (e *ReadyError) Error() string {
	if e.Answer != "" {
		return fmt.Sprintf("ready_cmd did not pass within %s (last attempt: %s; last answer: %s)", e.Timeout, e.Last, e.Answer)
	}
	return fmt.Sprintf("ready_cmd did not pass within %s (last attempt: %s)", e.Timeout, e.Last)
}

// Unwrap makes a ReadyError unavailable.
func (e *ReadyError) Unwrap() error { return sandbox.ErrUnavailable }

// versionSettings returns a custom version's settings (zero for platform
// templates and unknown versions).
func (s *Service) versionSettings(ctx context.Context, versionID string) store.TemplateSettings {
	if versionID == "" {
		return store.TemplateSettings{}
	}
	v, err := s.store.GetTemplateVersion(ctx, versionID)
	if err != nil {
		return store.TemplateSettings{}
	}
	return v.Spec.Settings
}

// startTemplateProcesses runs a custom template's start_cmd in the
// background on a cold boot (a memory restore has it running already) and
// waits for its ready_cmd to pass, within the template's bounded wait.
func (s *Service) startTemplateProcesses(ctx context.Context, ag *agentclient.Client, set store.TemplateSettings, restored bool) error {
	if len(set.StartCmd) > 0 && !restored {
		ps, err := ag.StartProcess(ctx, agentclient.ProcessRequest{Cmd: set.StartCmd[0], Args: set.StartCmd[1:], Tag: "start_cmd"})
		if err != nil {
			return fmt.Errorf("start_cmd: %w", err)
		}
		ps.Close() // detach: it runs on with the sandbox
	}
	if len(set.ReadyCmd) == 0 {
		return nil
	}
	timeout := s.cfg.TemplateBuilds.ReadyTimeout
	if set.ReadyTimeoutMs > 0 {
		timeout = time.Duration(set.ReadyTimeoutMs) * time.Millisecond
	}
	return waitReady(ctx, ag, set.ReadyCmd, timeout)
}

// waitReady runs argv until it exits 0, every 100 ms, for at most
// timeout.
func waitReady(ctx context.Context, ag *agentclient.Client, argv []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last, answer := "never ran", ""
	for {
		left := time.Until(deadline)
		if left <= 0 {
			e := &ReadyError{Timeout: timeout, Last: last}
			if answer != last {
				e.Answer = answer
			}
			return e
		}
		var out strings.Builder
		collect := func(b []byte) {
			if out.Len() < 512 {
				out.Write(b)
			}
		}
		res, err := ag.Exec(ctx, agentclient.ExecRequest{Cmd: argv[0], Args: argv[1:], Timeout: min(left, 10*time.Second)}, collect, collect)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			last = err.Error()
		case res.Code == 0 && !res.Signaled:
			return nil
		case res.TimedOut:
			last = "timed out"
		default:
			last = res.Status
			if o := strings.TrimSpace(out.String()); o != "" {
				last += ": " + o
			}
			answer = last
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startedCloneSpec is how a create from a version with a started-state
// snapshot starts: restoring that snapshot when the sandbox has the
// snapshot's size and class, with its own identity. It returns nil and why
// not when it does not qualify.
func startedCloneSpec(sb sandbox.Sandbox, v store.TemplateVersion) (*CloneSpec, string) {
	st := v.Spec.Started
	if st == nil || sb.SourceSnapshotID != "" {
		return nil, ""
	}
	if sb.CPU != st.CPU || sb.RAMMB != st.RAMMB || sb.Runtime != st.Runtime || sb.DiskGB < st.DiskGB {
		return nil, fmt.Sprintf("the template's started state is for cpu %g, ram_mb %d, disk_gb %d or more on %s; this sandbox has cpu %g, ram_mb %d, disk_gb %d on %s: booted cold",
			st.CPU, st.RAMMB, st.DiskGB, st.Runtime, sb.CPU, sb.RAMMB, sb.DiskGB, sb.Runtime)
	}
	return &CloneSpec{SnapshotID: st.SnapshotID, MemoryImage: st.MemoryImage, SourceAgentToken: st.AgentToken, NewIdentity: true}, ""
}

// startedState boots a sandbox from a new version, runs its start_cmd,
// waits for its ready_cmd and checkpoints its memory: creates of the same
// size and class restore it instead of booting (docs/templates.md).
func (s *Service) startedState(ctx context.Context, v store.TemplateVersion, network *sandbox.NetworkPolicy) (*store.StartedState, error) {
	sn, err := s.snapshotter()
	if err != nil {
		return nil, err
	}
	set := v.Spec.Settings
	st := &store.StartedState{CPU: set.CPU, RAMMB: set.RAMMB, DiskGB: set.DiskGB, Runtime: set.Runtime, AgentToken: randomToken()}
	if st.CPU == 0 {
		st.CPU = sandbox.DefaultCPU
	}
	if st.RAMMB == 0 {
		st.RAMMB = sandbox.DefaultRAM
	}
	if st.DiskGB == 0 {
		st.DiskGB = sandbox.DefaultDisk
	}
	if st.Runtime == "" {
		st.Runtime = s.cfg.DefaultRuntime
	}
	id := sandbox.NewID(sandbox.PrefixSandbox)
	spec := StartSpec{ID: id, RootFS: v.RootFS, CPU: st.CPU, RAMMB: st.RAMMB, DiskGB: st.DiskGB, AgentToken: st.AgentToken, Runtime: st.Runtime}
	if network != nil {
		spec.Network = &NetworkSpec{Policy: *network}
	}
	defer s.builds.holdBox(id)()
	defer s.host.Destroy(context.WithoutCancel(ctx), id)
	inst, err := s.host.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	ag := agentclient.New("http://"+net.JoinHostPort(inst.Address, strconv.Itoa(AgentPort)), st.AgentToken, nil)
	if err := ag.InitWith(ctx, agentclient.InitRequest{Env: set.Env, User: set.User, Workdir: set.Workdir}); err != nil {
		return nil, err
	}
	if err := s.startTemplateProcesses(ctx, ag, set, false); err != nil {
		return nil, err
	}
	st.SnapshotID = sandbox.NewID(sandbox.PrefixSnapshot)
	files, err := sn.Snapshot(ctx, id, st.SnapshotID, st.Runtime, true)
	if err != nil {
		return nil, err
	}
	st.MemoryImage = files.MemoryImage
	return st, nil
}
