package host

import (
	"cmp"
	"context"
	"net"
	"strconv"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/runtime/oci"
	"github.com/platinum-dev/platinum/internal/syncs"
)

var (
	_ hostapi.OOMReporter  = (*Host)(nil)
	_ hostapi.ExitReporter = (*Host)(nil)
)

// oomState is where the host's OOM reports meet: the runtimes' kernel
// kills (oci.Runtime.OnOOM) and, for gVisor sandboxes, one long poll per
// sandbox of its guard's kills (pt-agent's GET /oom).
type oomState struct {
	events chan hostapi.OOMEvent
	exits  chan string   // sandboxes whose containers ended on their own
	guards syncs.Cancels // gVisor sandbox → its guard poll
}

// oomQueue bounds the reports waiting for the control plane; past it a
// report is dropped (and logged): OOM kills come in bursts at most.
const oomQueue = 256

func (h *Host) initOOM() {
	h.oom.events = make(chan hostapi.OOMEvent, oomQueue)
	h.oom.exits = make(chan string, oomQueue)
	for _, rt := range h.rts {
		if r, ok := ociRuntime(rt); ok {
			r.OnExit(func(e oci.Exit) {
				select {
				case h.oom.exits <- e.ID:
				default:
					h.log.Warn("exit report dropped: the queue is full; the reconciler will find it", "sandbox", e.ID)
				}
			})
			r.OnOOM(func(k oci.OOMKill) {
				scope := hostapi.OOMScopeProcess
				if k.Sandbox {
					scope = hostapi.OOMScopeSandbox
				}
				h.emitOOM(hostapi.OOMEvent{SandboxID: k.ID, Scope: scope, Count: k.Count, Source: "kernel", At: k.At})
			})
		}
	}
}

func (h *Host) emitOOM(e hostapi.OOMEvent) {
	select {
	case h.oom.events <- e:
	default:
		h.log.Warn("OOM report dropped: the queue is full", "sandbox", e.SandboxID, "scope", e.Scope)
	}
}

// OOMEvents implements hostapi.OOMReporter.
func (h *Host) OOMEvents() <-chan hostapi.OOMEvent { return h.oom.events }

// Exits implements hostapi.ExitReporter.
func (h *Host) Exits() <-chan string { return h.oom.exits }

// WatchOOM implements hostapi.OOMReporter: the sandbox's runtime watches
// its memory cgroup and its process's end (hostapi.ExitReporter; the
// runtime starts both itself at every boot; this covers containers a
// previous ptd started), and a gVisor sandbox's guard is polled for its
// kills.
func (h *Host) WatchOOM(id, agentToken string) {
	ctx := context.Background()
	rt := h.runtimeOf(ctx, id)
	r, ok := ociRuntime(rt)
	if !ok {
		return
	}
	r.Watch(id)
	if rt.Name() != ClassGVisor {
		return
	}
	if gctx, _, ok := h.oom.guards.Start(ctx, id); ok {
		go h.pollGuard(gctx, id, agentToken)
	}
}

// unwatchOOM ends a sandbox's guard poll (its container is going away).
func (h *Host) unwatchOOM(id string) {
	h.oom.guards.Stop(id)
}

// guardWait is one long poll of a guard (just under pt-agent's cap of a
// minute: each poll wakes an idle sandbox); guardRetry bounds the pause
// after a failed one (the sandbox may be checkpointing, or gone).
const (
	guardWait  = 55 * time.Second
	guardRetry = 5 * time.Second
)

// pollGuard reports the guard's kills until ctx ends. Its first poll asks
// for the kills no earlier poll acknowledged (one before a restart of ptd
// did), so none is reported twice and none missed, even one that came
// before this poll.
func (h *Host) pollGuard(ctx context.Context, id, token string) {
	var after *uint64
	for ctx.Err() == nil {
		ep, ok := h.net.Endpoint(id)
		if !ok {
			h.unwatchOOM(id)
			return
		}
		c := agentclient.New("http://"+net.JoinHostPort(ep.Addr.String(), strconv.Itoa(hostapi.AgentPort)), token, h.oomClient)
		kills, err := c.OOMKills(ctx, after, guardWait)
		if err != nil {
			select {
			case <-time.After(guardRetry):
			case <-ctx.Done():
			}
			continue
		}
		for _, k := range kills {
			if after == nil || k.Seq > *after {
				after = &k.Seq
			}
			h.emitOOM(hostapi.OOMEvent{SandboxID: id, Scope: hostapi.OOMScopeProcess, Count: 1, PID: k.PID, Command: k.Command,
				RSSBytes: k.RSSBytes, Source: cmp.Or(k.Source, "guard"), At: k.At})
		}
	}
}

// ociRuntime returns the *oci.Runtime behind rt, if it is one.
func ociRuntime(rt any) (*oci.Runtime, bool) {
	switch r := rt.(type) {
	case *oci.Runtime:
		return r, true
	case *oci.CheckpointRuntime:
		return r.Runtime, true
	}
	return nil, false
}
