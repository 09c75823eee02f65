package controlplane

import (
	"context"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/upstream"
)

// EventOOMKilled is the event type of an OOM kill in a sandbox: one
// process (scope process: the sandbox runs on, as a runc sandbox's
// processes do when its cgroup's OOM killer picks one, or a gVisor
// sandbox's when gVisor's own kernel or pt-agent's memory guard does), or
// the whole sandbox (scope sandbox: the host ended a gVisor sandbox; it
// boots again from its disk at once, restartEnded).
const EventOOMKilled = "oom_killed"

// OOMKilledData is the data of an oom_killed event.
type OOMKilledData struct {
	Scope string `json:"scope"`
	Count int    `json:"count"`
	// PID, Command and RSSBytes name the process when the guard killed it
	// (gVisor); a kernel (the host's, or gVisor's) does not say which one
	// it killed.
	PID      int    `json:"pid,omitempty"`
	Command  string `json:"command,omitempty"`
	RSSBytes uint64 `json:"rss_bytes,omitempty"`
	Source   string `json:"source"`
	At       string `json:"at"`
}

// watchOOM asks the host to report the running sandbox's OOM kills.
func (s *Service) watchOOM(sb sandbox.Sandbox) {
	if r, ok := s.host.(hostapi.OOMReporter); ok {
		r.WatchOOM(sb.ID, sb.AgentToken)
	}
}

// reportOOM turns the host's OOM reports into oom_killed events of the
// sandboxes, and acts on its reports of sandboxes that ended on their own,
// until ctx ends.
func (s *Service) reportOOM(ctx context.Context) {
	r, ok := s.host.(hostapi.OOMReporter)
	if !ok {
		return
	}
	var exits <-chan string // nil: never
	if er, ok := s.host.(hostapi.ExitReporter); ok {
		exits = er.Exits()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-exits:
			s.ended(ctx, id)
		case e := <-r.OOMEvents():
			sb, err := s.store.GetSandbox(ctx, "", e.SandboxID)
			if err != nil {
				continue // a container of no sandbox (the sweep takes it)
			}
			s.log.WarnContext(ctx, "out of memory: killed", "sandbox", sb.ID, "scope", e.Scope, "count", e.Count,
				"pid", e.PID, "command", e.Command, "source", e.Source)
			s.event(ctx, sb, EventOOMKilled, OOMKilledData{Scope: e.Scope, Count: e.Count, PID: e.PID, Command: e.Command,
				RSSBytes: e.RSSBytes, Source: e.Source, At: sandbox.FormatTime(e.At)})
			if e.Scope == hostapi.OOMScopeSandbox {
				s.bg.Go(func(ctx context.Context) { s.restartEnded(ctx, sb.ID, errEndedForMemory, reasonOOM) })
			}
		}
	}
}

// errEndedForMemory is what a call in flight in a sandbox its host ended
// for memory answers, at once rather than when TCP gives up.
var errEndedForMemory = fmt.Errorf("%w: the sandbox ran out of memory and its host ended it as a whole (see its oom_killed event); its processes were lost, and it is starting again from its disk", sandbox.ErrUnavailable)

// errEnded is what a call in flight in a sandbox that ended on its own
// answers.
var errEnded = fmt.Errorf("%w: the sandbox ended: its runtime's process on the host exited without ptd ending it (killed, or crashed); its processes were lost, and it is starting again from its disk", sandbox.ErrUnavailable)

// ended acts on a sandbox whose container ended without the host ending
// it: the calls in flight into it end now rather than when TCP gives up
// (a gVisor sandbox killed outright closes no connection), and it boots
// again from its disk at once rather than at the reconciler's next pass.
// A report about a sandbox not recorded running changes nothing, nor one
// about a sandbox its host runs again (restartEnded waits for it to stop
// running). That is not asked here: the runtime may still count the
// ended process as running until it is reaped (`runsc state` does).
func (s *Service) ended(ctx context.Context, id string) {
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil || sb.State != sandbox.StateRunning || s.elsewhere(sb) {
		return
	}
	s.log.WarnContext(ctx, "sandbox ended on its host without ptd ending it", "sandbox", id)
	s.bg.Go(func(ctx context.Context) { s.restartEnded(ctx, id, errEnded, reasonEnded) })
}

// endedWait bounds how long restartEnded waits for the host to stop
// running a sandbox it ended; past it the reconciler's next pass decides.
const endedWait = 10 * time.Second

// restartEnded handles a sandbox that ended (a gVisor sandbox its host
// ended past its stall room, or one that ended on its own) as soon as the
// host no longer runs it: the calls in flight into it end with cause (REST
// ones through its agent clients, those through the E2B, Daytona and
// preview proxies with their connections closed), and it boots again from
// its disk, rather than at the reconciler's next pass: with the default
// interval the sandbox answered nothing for up to 30 s (31 s in
// a gVisor memory bomb past the stall room, before this). Waiting for the
// host first keeps a late report (a kill counted after the sandbox was
// booted again) from ending the new boot's calls. lost is the reason its
// processes_lost event gives.
func (s *Service) restartEnded(ctx context.Context, id string, cause error, lost string) {
	end := time.Now().Add(endedWait)
	for s.host.Running(ctx, id) {
		if time.Now().After(end) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.abortAgent(id, cause)
	upstream.Abort(id)
	s.ensureRunning(ctx, id, lost)
}
