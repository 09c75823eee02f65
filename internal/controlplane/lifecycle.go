package controlplane

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Stop moves a running sandbox to stopped, keeping its disk and spec, and
// its memory where the host can. It is idempotent: stopping a stopped (or
// stopping) sandbox returns it unchanged. The work happens in the
// background; wait with WaitFor(…, StateStopped, …).
func (s *Service) Stop(ctx context.Context, p Principal, id string) (sandbox.Sandbox, error) {
	t0 := time.Now()
	sb, err := s.stop(ctx, p, id, "", true)
	observeRefusal("stop", sb.Runtime, t0, err)
	return sb, err
}

// StopDiskOnly stops the sandbox without keeping its memory (E2B's pause
// with memory: false): the next start is a cold boot from disk.
func (s *Service) StopDiskOnly(ctx context.Context, p Principal, id string) (sandbox.Sandbox, error) {
	return s.stop(ctx, p, id, "", false)
}

func (s *Service) stop(ctx context.Context, p Principal, id, reason string, keepMemory bool) (sandbox.Sandbox, error) {
	// A stop asked for is a stop made: the caller going away (or its wait
	// running out) does not cut the state change in half.
	ctx = context.WithoutCancel(ctx)
	for {
		sb, err := s.Get(ctx, p, id, false)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		switch sb.State {
		case sandbox.StateStopped, sandbox.StateStopping, sandbox.StateArchiving, sandbox.StateArchived:
			return sb, nil
		case sandbox.StateRunning, sandbox.StateFailed:
		default:
			return sb, &StateError{State: sb.State, Want: "running or failed"}
		}
		from := sb.State
		sb.State, sb.Reason = sandbox.StateStopping, reason
		sb, err = s.update(ctx, sb)
		if isConflict(err) {
			continue
		}
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		s.log.InfoContext(ctx, "sandbox stopping", "sandbox", id, "from", from, "reason", reason, "keep_memory", keepMemory)
		s.bg.GoFor(ctx, func(ctx context.Context) { s.doStop(ctx, id, keepMemory) })
		return sb, nil
	}
}

// doStop freezes (or stops) the sandbox on its host and records stopped.
func (s *Service) doStop(ctx context.Context, id string, keepMemory bool) {
	sb, unlock, ok := s.lockIn(ctx, id, sandbox.StateStopping)
	if !ok {
		return
	}
	defer unlock()
	// Ephemeral sandboxes are deleted when they stop: no point keeping RAM.
	keep := keepMemory && sb.Retention.Type != sandbox.TypeEphemeral
	kept, err := s.host.Stop(ctx, id, keep)
	if err != nil {
		if ctx.Err() != nil {
			return // the reconciler finishes it after a restart
		}
		s.log.ErrorContext(ctx, "sandbox stop failed", "sandbox", id, "err", err)
		s.markFailed(ctx, id, sandbox.StateStopping, "stop: "+err.Error(), nil)
		return
	}
	now := s.now()
	sb, ok, err = s.transition(ctx, id, sandbox.StateStopping, sandbox.StateStopped, func(sb *sandbox.Sandbox) {
		sb.StoppedAt = &now
	})
	if err != nil || !ok {
		return
	}
	s.forgetAgent(id)
	s.log.InfoContext(ctx, "sandbox stopped", "sandbox", id, "memory_kept", kept)
	if sb.Retention.Type == sandbox.TypeEphemeral {
		// The teardown this starts waits for our lock.
		s.deleteWithReason(ctx, id, "auto_deleted")
		return
	}
	if s.cfg.StopSnapshots {
		s.bg.Go(func(ctx context.Context) { s.takeStopSnapshot(ctx, id) })
	}
}

// Start brings a stopped (or archived, or failed) sandbox back to running;
// calling it on a running or starting sandbox returns it unchanged. The
// work happens in the background; wait with WaitFor(…, StateRunning, …).
// Once running, the record's LastStart says whether memory came back.
// (startWithin is StartWithin, metrics.go.) A wait for a host start slot
// ends after queueWait when that is shorter than the configured bound (0:
// the configured bound). queueWait and ctx's cancellation bound only that
// wait: once admitted, the state change is written whatever happens to
// ctx, so a caller's short wait never cancels the start it asked for.
func (s *Service) startWithin(ctx context.Context, p Principal, id string, queueWait time.Duration) (sb sandbox.Sandbox, err error) {
	// The host's start slot (admission.go), taken before the sandbox leaves
	// stopped, so a start the queue refuses leaves it stopped; held by the
	// background start until it ends.
	qctx := ctx
	if queueWait > 0 {
		var cancel context.CancelFunc
		qctx, cancel = context.WithTimeout(ctx, queueWait)
		defer cancel()
	}
	ctx = context.WithoutCancel(ctx)
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	for {
		sb, err = s.Get(ctx, p, id, false)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		switch sb.State {
		case sandbox.StateRestoring:
			if relocating(sb) {
				// A second start joins the relocation; here, on its new
				// host, it also drives it if nothing does yet.
				if !s.elsewhere(sb) {
					s.bg.Go(func(ctx context.Context) { s.driveRelocation(ctx, id) })
				}
				return sb, &RelocatingError{Sandbox: sb, To: sb.HostID}
			}
			return sb, nil
		case sandbox.StateRunning, sandbox.StateStarting, sandbox.StateCreating:
			return sb, nil
		case sandbox.StateStopped, sandbox.StateFailed:
			if s.elsewhere(sb) {
				// Its disk is on that host (lost, or this call came past
				// forwarding): booting here would boot an empty disk, unless
				// its stop snapshot holds the disk as it stopped.
				moved, err := s.startFromStopSnapshot(ctx, &sb)
				if err != nil {
					return sandbox.Sandbox{}, err
				}
				if !moved {
					return sb, fmt.Errorf("sandbox %s's disk is on host %s; it starts there once that host is back: %w", sb.ID, sb.HostID, sandbox.ErrUnavailable)
				}
				break
			}
			if release == nil && sb.State == sandbox.StateStopped {
				if moved, rerr, ok := s.relocateFromDrain(ctx, id); ok {
					return moved, rerr
				}
			}
			sb.State = sandbox.StateStarting
		case sandbox.StateArchived:
			// The disk comes back from the object store to this host.
			sb.State, sb.HostID = sandbox.StateRestoring, s.host.ID()
		default:
			return sb, &StateError{State: sb.State, Want: "stopped, archived or failed"}
		}
		if release == nil {
			if release, err = s.starts.acquire(qctx, sb.OrgID); err != nil {
				if moved, rerr, ok := s.relocate(ctx, id, err); ok {
					return moved, rerr
				}
				return sandbox.Sandbox{}, err
			}
			continue // the wait may have been long: read the state again
		}
		unlockQuota, lerr := s.tenancy.LockQuota(ctx, sb.OrgID)
		if lerr != nil {
			return sandbox.Sandbox{}, lerr
		}
		if err := s.tenancy.CheckQuota(ctx, sb.OrgID, sb.CPU, sb.RAMMB); err != nil {
			unlockQuota()
			return sandbox.Sandbox{}, err
		}
		if sb.RestoreSnapshotID == "" {
			sb.Reason = ""
		}
		sb, err = s.update(ctx, sb)
		unlockQuota()
		if isConflict(err) {
			continue
		}
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		s.log.InfoContext(ctx, "sandbox starting", "sandbox", id, "state", sb.State)
		done := release
		release = nil // the background start gives it back
		if sb.State == sandbox.StateRestoring {
			s.bg.GoFor(ctx, func(ctx context.Context) { defer done(); s.doRestoring(ctx, id) })
		} else {
			s.bg.GoFor(ctx, func(ctx context.Context) { defer done(); s.doStart(ctx, id) })
		}
		return sb, nil
	}
}

// doStart thaws or boots the sandbox and records what came back.
func (s *Service) doStart(ctx context.Context, id string) {
	sb, unlock, ok := s.lockIn(ctx, id, sandbox.StateStarting)
	if !ok {
		return
	}
	defer unlock()
	// A sandbox that failed before its first boot (template build, host
	// start) has no version yet: resolve its template as its create would.
	var pinned string
	if sb.TemplateVersionID == "" {
		v, verr := s.tpl.ready(ctx, sb.Template)
		if verr != nil {
			if ctx.Err() == nil {
				s.markFailed(ctx, id, sandbox.StateStarting, "template: "+verr.Error(), nil)
			}
			return
		}
		sb.TemplateVersionID, pinned = v.ID, v.ID
	}
	inst, err := s.boot(ctx, sb)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		s.log.ErrorContext(ctx, "sandbox start failed", "sandbox", id, "err", err)
		s.markFailed(ctx, id, sandbox.StateStarting, "start: "+err.Error(), nil)
		return
	}
	now := s.now()
	ls := &sandbox.LastStart{Restore: sandbox.RestoreDiskOnly, At: now}
	if inst.MemoryRestored {
		ls.Restore, ls.RAMRestored = sandbox.RestoreMemory, true
	} else if inst.RestoreFailure != "" {
		ls.Reason = inst.RestoreFailure + "; booted from disk"
	} else {
		ls.Reason = "memory was not kept (stopped past the warm window, under memory pressure, or the host restarted)"
	}
	_, ok, err = s.transition(ctx, id, sandbox.StateStarting, sandbox.StateRunning, func(sb *sandbox.Sandbox) {
		sb.Address, sb.LastStart, sb.LastActivityAt, sb.StoppedAt = inst.Address, ls, &now, nil
		if pinned != "" {
			sb.TemplateVersionID = pinned
		}
		if !inst.MemoryRestored {
			sb.Live = s.headroom(*sb) // a cold boot gets new room to grow live
		}
	})
	if err != nil || !ok {
		return
	}
	s.forgetAgent(id)
	s.deliverHangups(id, s.agent(id, inst.Address, sb.AgentToken))
	s.watchOOM(sb)
	if !inst.MemoryRestored {
		s.event(ctx, sb, "start_ram_not_restored", ls)
	}
	s.log.InfoContext(ctx, "sandbox started", "sandbox", id, "restore", ls.Restore)
}

// boot starts an existing sandbox on its host from its pinned template
// version (thaw or cold boot) and hands the agent the current environment,
// which may have changed while it was stopped.
func (s *Service) boot(ctx context.Context, sb sandbox.Sandbox) (Instance, error) {
	v, err := s.store.GetTemplateVersion(ctx, sb.TemplateVersionID)
	if err != nil {
		return Instance{}, err
	}
	if v.Status != store.TemplateReady {
		return Instance{}, fmt.Errorf("template version %s is %s", v.ID, v.Status)
	}
	rootfs, err := s.templateRootFS(ctx, v)
	if err != nil {
		return Instance{}, err
	}
	pctx, done, ok := s.bootSlot(ctx, sb.ID, sb.State)
	if !ok {
		if err := ctx.Err(); err != nil {
			return Instance{}, err
		}
		return Instance{}, fmt.Errorf("sandbox %s left %s while waiting to boot: %w", sb.ID, sb.State, sandbox.ErrConflict)
	}
	defer done()
	inst, err := s.host.Start(pctx, s.startSpec(sb, rootfs))
	if err != nil {
		return Instance{}, err
	}
	return inst, s.initAgent(pctx, sb, inst)
}

// event appends a host event for the sandbox; failures are logged only:
// events inform, they never block the lifecycle.
func (s *Service) event(ctx context.Context, sb sandbox.Sandbox, typ string, data any) {
	if err := s.store.AddEvent(ctx, sb.OrgID, sb.ID, typ, data); err != nil {
		s.log.WarnContext(ctx, "event", "sandbox", sb.ID, "type", typ, "err", err)
	}
}

// SetExpiry sets when the sandbox expires and what happens then; a zero
// time clears the expiry.
func (s *Service) SetExpiry(ctx context.Context, p Principal, id string, at time.Time, action sandbox.ExpiryAction) (sandbox.Sandbox, error) {
	if action != sandbox.ExpireDelete && action != sandbox.ExpireStop {
		return sandbox.Sandbox{}, &sandbox.FieldError{Field: "expiry_action", Reason: "must be delete or stop"}
	}
	for {
		sb, err := s.Get(ctx, p, id, false)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		if sb.State == sandbox.StateDeleting {
			return sb, &StateError{State: sb.State, Want: "not deleted"}
		}
		if at.IsZero() {
			sb.ExpiresAt, sb.ExpiryAction, sb.TTLMs = nil, "", 0
		} else {
			at = at.UTC()
			// ttl_ms is the lifetime asked for, counted from now.
			sb.ExpiresAt, sb.ExpiryAction, sb.TTLMs = &at, action, max(1, time.Until(at).Milliseconds())
		}
		out, err := s.update(ctx, sb)
		if isConflict(err) {
			continue
		}
		return out, err
	}
}

// AgentEndpoint returns a running sandbox's agent address (host:port) and
// access token, for transports that route traffic straight to pt-agent
// (E2B's envd protocol). A sandbox that is not running is a StateError.
func (s *Service) AgentEndpoint(ctx context.Context, p Principal, id string) (addr, token string, err error) {
	sb, err := s.Get(ctx, p, id, false)
	if err != nil {
		return "", "", err
	}
	if sb.State != sandbox.StateRunning {
		return "", "", &StateError{State: sb.State}
	}
	s.Touch(id)
	return fmt.Sprintf("%s:%d", sb.Address, AgentPort), sb.AgentToken, nil
}

// Touch records activity (exec, files, preview traffic) on a sandbox for
// its auto-stop timer. It only writes memory.
func (s *Service) Touch(id string) {
	s.activityMu.Lock()
	s.activity[id] = s.now()
	s.activityMu.Unlock()
}

func (s *Service) lastActivity(sb sandbox.Sandbox) time.Time {
	t := sb.CreatedAt
	if sb.LastActivityAt != nil && sb.LastActivityAt.After(t) {
		t = *sb.LastActivityAt
	}
	s.activityMu.Lock()
	defer s.activityMu.Unlock()
	if a, ok := s.activity[sb.ID]; ok && a.After(t) {
		t = a
	}
	return t
}

func (s *Service) now() time.Time { return time.Now().UTC() }

// runTimers fires TTLs and retention timers, and ends warm windows. Timers
// live in the store, so they fire after a restart too.
func (s *Service) runTimers(ctx context.Context) {
	sbs, err := s.store.SandboxesInStates(ctx, sandbox.StateRunning, sandbox.StateStopped, sandbox.StateArchived, sandbox.StateFailed)
	if err != nil {
		s.log.WarnContext(ctx, "timers", "err", err)
		return
	}
	sbs = s.mine(sbs)
	now := s.now()
	admin := Principal{}
	var frozen []sandbox.Sandbox
	for _, sb := range sbs {
		p := admin
		p.OrgID = sb.OrgID
		r := sb.Retention
		switch {
		case sb.ExpiresAt != nil && !now.Before(*sb.ExpiresAt):
			if sb.ExpiryAction == sandbox.ExpireStop && sb.State == sandbox.StateRunning {
				s.log.InfoContext(ctx, "ttl expired: stopping", "sandbox", sb.ID)
				if _, err := s.stop(ctx, p, sb.ID, "ttl_expired", true); err == nil {
					s.SetExpiry(ctx, p, sb.ID, time.Time{}, sandbox.ExpireStop)
				}
			} else if sb.ExpiryAction != sandbox.ExpireStop {
				s.log.InfoContext(ctx, "ttl expired: deleting", "sandbox", sb.ID)
				s.deleteWithReason(ctx, sb.ID, "ttl_expired")
			}
		case sb.State == sandbox.StateRunning && r.AutoStopMinutes > 0 &&
			now.Sub(s.lastActivity(sb)) >= time.Duration(r.AutoStopMinutes)*s.cfg.Minute:
			s.log.InfoContext(ctx, "auto-stop after inactivity", "sandbox", sb.ID)
			s.stop(ctx, p, sb.ID, "auto_stopped", true)
		case (sb.State == sandbox.StateStopped || sb.State == sandbox.StateArchived) && r.AutoDeleteDays > 0 && sb.StoppedAt != nil &&
			now.Sub(*sb.StoppedAt) >= time.Duration(r.AutoDeleteDays)*s.cfg.Day:
			// Counted from the stop: an auto-archive on the way does not
			// restart (or cancel) the delete timer.
			s.log.InfoContext(ctx, "auto-delete", "sandbox", sb.ID)
			s.deleteWithReason(ctx, sb.ID, "auto_deleted")
		case sb.State == sandbox.StateStopped && r.AutoArchiveDays > 0 && sb.StoppedAt != nil &&
			now.Sub(*sb.StoppedAt) >= time.Duration(r.AutoArchiveDays)*s.cfg.Day:
			s.log.InfoContext(ctx, "auto-archive", "sandbox", sb.ID)
			if _, err := s.Archive(ctx, p, sb.ID); err != nil {
				s.log.WarnContext(ctx, "auto-archive", "sandbox", sb.ID, "err", err)
			}
		case sb.State == sandbox.StateStopped && s.host.Frozen(ctx, sb.ID):
			frozen = append(frozen, sb)
		case sb.State == sandbox.StateRunning:
			s.autogrow(ctx, sb)
		}
	}
	s.coolWarm(ctx, frozen, now)
	s.dispose(ctx, now)
}

// coolWarm stops frozen sandboxes disk-only once their warm window passed,
// and the oldest ones while frozen RAM is over the budget.
func (s *Service) coolWarm(ctx context.Context, frozen []sandbox.Sandbox, now time.Time) {
	sort.Slice(frozen, func(i, j int) bool { return stoppedAt(frozen[i]).After(stoppedAt(frozen[j])) })
	budget := s.cfg.WarmBudgetMB
	for _, sb := range frozen {
		over := budget < sb.RAMMB
		if !over {
			budget -= sb.RAMMB
		}
		if !over && now.Sub(stoppedAt(sb)) < s.cfg.WarmWindow {
			continue
		}
		s.bg.Go(func(ctx context.Context) {
			unlock := s.locks.Lock(sb.ID)
			defer unlock()
			if cur, err := s.store.GetSandbox(ctx, "", sb.ID); err != nil || cur.State != sandbox.StateStopped {
				return
			}
			if _, err := s.host.Stop(ctx, sb.ID, false); err != nil {
				s.log.WarnContext(ctx, "end warm window", "sandbox", sb.ID, "err", err)
				return
			}
			s.log.InfoContext(ctx, "warm window over: stopped disk-only", "sandbox", sb.ID, "over_budget", over)
		})
	}
}

func stoppedAt(sb sandbox.Sandbox) time.Time {
	if sb.StoppedAt != nil {
		return *sb.StoppedAt
	}
	return sb.UpdatedAt
}

// RunTimers checks timers every TimerInterval until ctx ends.
func (s *Service) RunTimers(ctx context.Context) {
	s.bg.Loop(ctx, s.cfg.TimerInterval, false, nil, s.runTimers, nil)
}
