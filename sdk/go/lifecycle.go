package platinum

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"
)

// SandboxType sets when a sandbox auto-stops, auto-archives and
// auto-deletes. Each type's timers are defaults: CreateSandboxRequest's
// AutoStopMinutes, AutoArchiveDays and AutoDeleteDays override one.
type SandboxType string

// The sandbox types and their retention defaults.
const (
	// TypePersistent (the default) stops after 60 idle minutes, archives 7
	// days after it stopped and is never deleted by a timer.
	TypePersistent SandboxType = "persistent"
	// TypeEphemeral stops after 15 idle minutes and is deleted when it
	// stops, for throwaway work.
	TypeEphemeral SandboxType = "ephemeral"
	// TypeDev stops after 120 idle minutes and archives 30 days after it
	// stopped, for interactive work that pauses for longer.
	TypeDev SandboxType = "dev"
)

// RestoreKind is what a start brought back.
type RestoreKind string

// The kinds of start.
const (
	// RestoreMemory: memory came back, processes are intact.
	RestoreMemory RestoreKind = "memory"
	// RestoreDiskOnly: a cold boot from the disk; restart whatever the
	// sandbox should be running before using it.
	RestoreDiskOnly RestoreKind = "disk_only"
)

// Why a sandbox was deleted (Sandbox.DeletedReason).
const (
	// DeletedByUser: a Delete call.
	DeletedByUser = "user_deleted"
	// DeletedAuto: its AutoDeleteDays ran out, or an ephemeral sandbox
	// stopped.
	DeletedAuto = "auto_deleted"
	// DeletedTTLExpired: it passed ExpiresAt.
	DeletedTTLExpired = "ttl_expired"
	// DeletedByPlatform: the platform removed it.
	DeletedByPlatform = "platform_deleted"
	// DeletedHostLost: its host lost its disk, so it could not run again.
	DeletedHostLost = "host_lost"
	// DeletedOrgDeleted: its organization was deleted.
	DeletedOrgDeleted = "org_deleted"
)

// StartInfo is what a start brought back, as kept in the sandbox's
// metadata under "last_start".
type StartInfo struct {
	Restore     RestoreKind `json:"restore"`
	RAMRestored bool        `json:"ram_restored"`
	// Reason says why memory did not come back, when it did not.
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// LastStart returns the sandbox's latest start from Metadata["last_start"],
// which (unlike Restore and RAMRestored) is kept while the sandbox is
// stopped. It returns nil and no error when the sandbox was never started
// after its create.
func (s *Sandbox) LastStart() (*StartInfo, error) {
	raw, ok := s.Metadata["last_start"]
	if !ok {
		return nil, nil
	}
	var si StartInfo
	if err := json.Unmarshal([]byte(raw), &si); err != nil {
		return nil, fmt.Errorf("sandbox %s: metadata.last_start: %w", s.ID, err)
	}
	return &si, nil
}

// LifecycleOption changes how Stop, Start and Archive (and Pause, Resume)
// behave: WaitForStopped, WaitForRunning, WaitForArchived, OnStateChange.
type LifecycleOption interface {
	applyLifecycle(*lifecycleOptions)
}

type lifecycleOptions struct {
	wait    waitOptions
	onState func(*Sandbox)
}

func (o WaitOption) applyLifecycle(l *lifecycleOptions) { l.wait = o.w }

// WaitForStopped makes Stop (or Pause) return only once the sandbox is
// stopped, the way WaitForRunning does for Start: a server-side wait of up
// to timeout, then polling until ctx is done.
func WaitForStopped(timeout time.Duration) WaitOption {
	return WaitOption{waitOptions{state: StateStopped, timeout: timeout}}
}

// WaitForArchived makes Archive return only once the sandbox is archived,
// the way WaitForRunning does for Start.
func WaitForArchived(timeout time.Duration) WaitOption {
	return WaitOption{waitOptions{state: StateArchived, timeout: timeout}}
}

type onStateOption func(*Sandbox)

func (f onStateOption) applyLifecycle(l *lifecycleOptions) { l.onState = f }

// OnStateChange calls fn with the sandbox each time a lifecycle call sees
// it in a new state: the call's answer first, then every change while it
// waits. It is for progress output ("archiving…", "archived"). With it, a
// wait is done by polling alone, because a server-side wait would hide
// the states in between. fn runs on the calling goroutine.
func OnStateChange(fn func(*Sandbox)) LifecycleOption { return onStateOption(fn) }

// Stop stops a running (or failed) sandbox, keeping its disk and spec, and
// its memory where the host can, so Start resumes processes intact. An
// ephemeral sandbox is deleted when it stops. Stop is idempotent: a
// stopped, stopping, archiving or archived sandbox is returned unchanged.
//
// Without options Stop returns at once (state stopping). With
// WaitForStopped it returns the stopped sandbox; an archived one, or an
// ephemeral one deleted because it stopped, also counts as stopped. If
// the sandbox ends up elsewhere (failed, started again) it returns it and
// a *StateError; if ctx ends first, the sandbox as last seen and ctx's
// error. A sandbox in a state that cannot stop (e.g. creating) gives an
// APIError with code conflict whose State says which.
func (s *SandboxesService) Stop(ctx context.Context, id string, opts ...LifecycleOption) (*Sandbox, error) {
	return s.lifecycle(ctx, id, "stop", StateStopped, opts)
}

// Pause is Stop under the name other sandbox APIs use (POST …/pause).
func (s *SandboxesService) Pause(ctx context.Context, id string, opts ...LifecycleOption) (*Sandbox, error) {
	return s.lifecycle(ctx, id, "pause", StateStopped, opts)
}

// Start brings a stopped, archived or failed sandbox back to running; an
// archived one is restored from cold storage first (state restoring).
// Start is idempotent: a running (or creating, starting, restoring)
// sandbox is returned as is, and a Start while one is in flight joins it.
//
// Without options Start returns at once (state starting or restoring).
// With WaitForRunning it returns the running sandbox, whose Restore and
// RAMRestored say whether memory came back; if the sandbox ends up
// elsewhere (failed, stopped or archived again) it returns it and a
// *StateError; if ctx ends first, the sandbox as last seen and ctx's
// error. A sandbox that cannot start now (e.g. stopping) gives an APIError
// with code conflict whose State says which.
func (s *SandboxesService) Start(ctx context.Context, id string, opts ...LifecycleOption) (*Sandbox, error) {
	return s.lifecycle(ctx, id, "start", StateRunning, opts)
}

// Resume is Start under the name other sandbox APIs use (POST …/resume).
func (s *SandboxesService) Resume(ctx context.Context, id string, opts ...LifecycleOption) (*Sandbox, error) {
	return s.lifecycle(ctx, id, "resume", StateRunning, opts)
}

// Archive moves a stopped sandbox's disk to cold storage and frees the
// local disk; an archived sandbox bills nothing, and Start restores it.
// Only a stopped sandbox can be archived: others give an APIError with
// code conflict whose State says which (stop a running one first). An
// APIError with code unavailable means ptd has no archive storage.
//
// Without options Archive returns at once (state archiving). With
// WaitForArchived it returns the archived sandbox; if the archive is
// interrupted (the sandbox is stopped again, with a Reason) or fails, it
// returns the sandbox and a *StateError; if ctx ends first, the sandbox
// as last seen and ctx's error.
func (s *SandboxesService) Archive(ctx context.Context, id string, opts ...LifecycleOption) (*Sandbox, error) {
	return s.lifecycle(ctx, id, "archive", StateArchived, opts)
}

// lifecycle is one stop/start/archive call (verb is the path's last
// element), then an optional wait for target: the server's wait first,
// then polling after a 202 until the goal is reached or hopeless.
func (s *SandboxesService) lifecycle(ctx context.Context, id, verb string, target State, opts []LifecycleOption) (*Sandbox, error) {
	var o lifecycleOptions
	for _, opt := range opts {
		opt.applyLifecycle(&o)
	}
	wait := o.wait.state != ""
	if wait && o.wait.state != target {
		return nil, fmt.Errorf("%s sandbox %s: it leads to %s, so it cannot wait for %s", verb, id, target, o.wait.state)
	}
	serverWait := o.wait
	if o.onState != nil {
		serverWait = waitOptions{} // poll instead, to see every state
	}
	var out waitResponse
	path := "/v1/sandboxes/" + url.PathEscape(id) + "/" + verb
	if _, err := s.c.doJSON(ctx, "POST", path, waitQuery(serverWait), nil, &out); err != nil {
		if sb, ferr := failedWait(err, id, target); sb != nil {
			return sb, ferr
		}
		return nil, fmt.Errorf("%s sandbox %s: %w", verb, id, err)
	}
	sb := &out.Sandbox
	seen := o.watcher()
	seen(sb)
	if !wait {
		return sb, nil
	}
	g := lifecycleGoal(target)
	if g.reached(sb) {
		return sb, nil
	}
	if g.hopeless(sb) {
		return sb, &StateError{ID: id, Want: target, Got: sb.State, Reason: sb.Reason}
	}
	// The server's wait ran out (202 wait_timed_out), or was not asked for:
	// poll. Calling again is also safe, but polling is cheaper.
	return s.waitUntil(ctx, id, g, sb, seen)
}

// watcher returns the function waits call with every record read: it
// passes state changes, and new progress of an archive or restore, on to
// OnStateChange's fn. Progress that ends while the state stays (a restore
// whose download is done but whose boot is not) is no news: passing it on
// would repeat the state's line.
func (o *lifecycleOptions) watcher() func(*Sandbox) {
	var last State
	var lastPct int64 = -1
	return func(sb *Sandbox) {
		pct := sb.Progress.Percent()
		if sb.State == last && (pct < 0 || pct == lastPct) {
			return
		}
		last, lastPct = sb.State, pct
		if o.onState != nil {
			o.onState(sb)
		}
	}
}

// lifecycleGoal is when a wait after stop, start or archive is over. The
// sandbox passes only through transitional states on its way to target;
// any other settled state means the call's work ended without reaching it
// (failed, interrupted, or another call moved the sandbox), so waiting
// longer cannot help. Unknown states count as transitional.
func lifecycleGoal(target State) goal {
	reached := func(sb *Sandbox) bool { return sb.State == target }
	if target == StateStopped {
		reached = func(sb *Sandbox) bool {
			switch sb.State {
			case StateStopped, StateArchived:
				return true // archived is stopped and more
			case StateDeleting, StateDeleted:
				return sb.Type == TypeEphemeral && sb.DeletedReason == DeletedAuto
			}
			return false
		}
	}
	return goal{
		want:    target,
		reached: reached,
		hopeless: func(sb *Sandbox) bool {
			switch sb.State {
			case StateRunning, StateStopped, StateArchived, StateFailed, StateDeleting, StateDeleted:
				return !reached(sb)
			}
			return false
		},
		includeDeleted: true,
	}
}
