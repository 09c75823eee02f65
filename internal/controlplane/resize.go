package controlplane

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// ResizeRequest changes a sandbox's size; nil fields stay.
type ResizeRequest struct {
	CPU    *float64
	RAMMB  *int
	DiskGB *int
}

// ResizeResult is what a resize did (docs/resize.md, "Live"): the sizes the sandbox has now, what was asked, whether memory
// shrank less than asked, and the live headroom.
type ResizeResult struct {
	Sandbox   sandbox.Sandbox
	AppliesAt string // now | next_start | pending (stopping: applied once stopped)
	Requested ResizeRequest
	Partial   bool
	// Guest is the size the sandbox sees from inside after a live cpu or
	// ram_mb change (nproc, /proc/meminfo's MemTotal); nil when it was not
	// measured (no live change, or its agent did not answer).
	Guest *GuestSize
}

// GuestSize is a running sandbox's own view of its size.
type GuestSize struct {
	CPUsOnline int
	MemTotalMB int
}

// NotResizableError is a live resize the sandbox cannot do; the user must
// stop it, resize, and start it (a cold boot gets new headroom).
type NotResizableError struct {
	ID     string
	Reason string
}

func (e *NotResizableError) Error() string {
	return fmt.Sprintf("this running sandbox cannot change cpu or ram_mb live (%s); stop it, then resize", e.Reason)
}

// Unwrap makes errors.Is(err, sandbox.ErrConflict) hold.
func (e *NotResizableError) Unwrap() error { return sandbox.ErrConflict }

func (r ResizeRequest) validate(cur sandbox.Sandbox) error {
	if r.CPU == nil && r.RAMMB == nil && r.DiskGB == nil {
		return &sandbox.FieldError{Field: "cpu", Reason: "give at least one of cpu, ram_mb, disk_gb"}
	}
	// Only a live resize splits them (docs/resize.md); a stopped sandbox takes
	// all three in one request and boots at them next time.
	if r.DiskGB != nil && (r.CPU != nil || r.RAMMB != nil) && cur.State == sandbox.StateRunning {
		return &sandbox.FieldError{Field: "disk_gb", Reason: "a running sandbox changes disk_gb in a separate request from cpu and ram_mb"}
	}
	if r.CPU != nil && (math.IsNaN(*r.CPU) || *r.CPU <= 0 || *r.CPU > sandbox.MaxCPU) {
		return &sandbox.FieldError{Field: "cpu", Reason: fmt.Sprintf("must be greater than 0 and at most %d", sandbox.MaxCPU)}
	}
	if r.RAMMB != nil && (*r.RAMMB < sandbox.MinRAMMB || *r.RAMMB > sandbox.MaxRAMMB) {
		return &sandbox.FieldError{Field: "ram_mb", Reason: fmt.Sprintf("must be between %d and %d", sandbox.MinRAMMB, sandbox.MaxRAMMB)}
	}
	if r.DiskGB != nil {
		if *r.DiskGB > sandbox.MaxDiskGB {
			return &sandbox.FieldError{Field: "disk_gb", Reason: fmt.Sprintf("must be at most %d", sandbox.MaxDiskGB)}
		}
		if *r.DiskGB < cur.DiskGB {
			return &sandbox.FieldError{Field: "disk_gb", Reason: fmt.Sprintf("disk_gb can only grow (it is %d)", cur.DiskGB)}
		}
	}
	return nil
}

// sizes is the cpu and ram_mb cur would have after the resize.
func (r ResizeRequest) sizes(cur sandbox.Sandbox) (cpu float64, ram int) {
	cpu, ram = cur.CPU, cur.RAMMB
	override(&cpu, r.CPU)
	override(&ram, r.RAMMB)
	return cpu, ram
}

// apply records the resize's sizes on sb (a stopped or stopping sandbox,
// whose next start boots at them).
func (r ResizeRequest) apply(sb *sandbox.Sandbox) {
	sb.CPU, sb.RAMMB = r.sizes(*sb)
	override(&sb.DiskGB, r.DiskGB)
}

// headroom is the live-resize room a boot records: the plan limits, and
// never less than the size it boots with.
func (s *Service) headroom(sb sandbox.Sandbox) *sandbox.LiveHeadroom {
	return &sandbox.LiveHeadroom{
		MaxCPU: math.Max(s.cfg.PlanMaxCPU, sb.CPU), MaxRAMMB: max(s.cfg.PlanMaxRAMMB, sb.RAMMB), BootRAMMB: sb.RAMMB,
	}
}

// Resize changes cpu and ram_mb (live within the boot's headroom when
// running) or grows disk_gb (online when running). A stopped sandbox
// records the size and boots at it next time, with new headroom.
func (s *Service) Resize(ctx context.Context, p Principal, id string, r ResizeRequest) (ResizeResult, error) {
	// A stop in progress holds the sandbox's lock for as long as the host
	// takes (a gVisor checkpoint can take seconds): record the size now,
	// without the lock (the write is a version-checked update, and the
	// stop's own transition re-reads the record), and answer 202 pending.
	for {
		sb, err := s.Get(ctx, p, id, false)
		if err != nil || sb.State != sandbox.StateStopping {
			break
		}
		res, err := s.pendingResize(ctx, sb, r)
		if !isConflict(err) {
			return res, err
		}
	}
	unlock := s.locks.Lock(id)
	defer unlock()
	for {
		sb, err := s.Get(ctx, p, id, false)
		if err != nil {
			return ResizeResult{}, err
		}
		if err := r.validate(sb); err != nil {
			return ResizeResult{}, err
		}
		if err := s.checkTreeResize(ctx, sb, r); err != nil {
			return ResizeResult{}, err
		}
		res := ResizeResult{Requested: r, AppliesAt: "now"}
		switch sb.State {
		case sandbox.StateRunning:
			// A running sandbox's growth counts against its org's pool
			// now (a stopped one's at its next start), checked and
			// written under the org's quota lock like a create.
			unlockQuota, err := s.tenancy.LockQuota(ctx, sb.OrgID)
			if err != nil {
				return ResizeResult{}, err
			}
			err = s.checkOrgResize(ctx, sb, r)
			if err == nil {
				err = s.resizeLive(ctx, &sb, r, &res)
			}
			if err != nil {
				unlockQuota()
				return ResizeResult{}, err
			}
			out, err := s.update(ctx, sb)
			unlockQuota()
			if isConflict(err) {
				continue
			}
			if err != nil {
				return ResizeResult{}, err
			}
			return s.resized(ctx, out, res), nil
		case sandbox.StateStopped, sandbox.StateArchived, sandbox.StateFailed:
			res.AppliesAt = "next_start"
			if r.CPU != nil || r.RAMMB != nil {
				// The new size needs a cold boot: drop frozen memory.
				if _, err := s.host.Stop(ctx, id, false); err != nil {
					return ResizeResult{}, err
				}
			}
			r.apply(&sb)
		case sandbox.StateStopping:
			res, err := s.pendingResize(ctx, sb, r)
			if isConflict(err) {
				continue
			}
			return res, err
		default:
			return ResizeResult{}, &StateError{State: sb.State, Want: "running or stopped to resize"}
		}
		out, err := s.update(ctx, sb)
		if isConflict(err) {
			continue
		}
		if err != nil {
			return ResizeResult{}, err
		}
		return s.resized(ctx, out, res), nil
	}
}

// resized records the resize event (usage bills the new size from here)
// and completes the answer.
func (s *Service) resized(ctx context.Context, out sandbox.Sandbox, res ResizeResult) ResizeResult {
	res.Sandbox = out
	s.event(ctx, out, "resized", map[string]any{"cpu": out.CPU, "ram_mb": out.RAMMB, "disk_gb": out.DiskGB, "applies_at": res.AppliesAt})
	return res
}

// checkOrgResize keeps a running sandbox's growth within its org's pool
// (as a create's do). Callers hold LockQuota.
func (s *Service) checkOrgResize(ctx context.Context, sb sandbox.Sandbox, r ResizeRequest) error {
	cpu, ram := r.sizes(sb)
	if cpu <= sb.CPU && ram <= sb.RAMMB {
		return nil
	}
	l, err := s.tenancy.Limits(ctx, sb.OrgID)
	if err != nil {
		return err
	}
	u, err := s.store.OrgUsage(ctx, sb.OrgID, tenancy.ActiveStates...)
	if err != nil {
		return err
	}
	c, m := u.CPU-sb.CPU+cpu, u.RAMMB-sb.RAMMB+ram
	switch {
	case l.MaxCPU > 0 && cpu > sb.CPU && c > l.MaxCPU+1e-9:
		return &sandbox.QuotaError{Scope: "org", Limit: "cpu", Max: l.MaxCPU, Wanted: c}
	case l.MaxRAMMB > 0 && ram > sb.RAMMB && m > l.MaxRAMMB:
		return &sandbox.QuotaError{Scope: "org", Limit: "ram_mb", Max: float64(l.MaxRAMMB), Wanted: float64(m)}
	}
	return nil
}

// pendingResize records the new size of a sandbox the host is still
// stopping (202 with applies_at "pending", docs/resize.md). The record is the
// size the next start boots at; memory the stop keeps (frozen or
// checkpointed) holds the old size, so that start boots cold instead
// (the host compares the size the memory booted with). Recorded at once,
// so a ptd crash before the stop ends loses nothing; one attempt, a
// store.ErrConflict means the caller reads the record again.
func (s *Service) pendingResize(ctx context.Context, sb sandbox.Sandbox, r ResizeRequest) (ResizeResult, error) {
	if err := r.validate(sb); err != nil {
		return ResizeResult{}, err
	}
	if err := s.checkTreeResize(ctx, sb, r); err != nil {
		return ResizeResult{}, err
	}
	r.apply(&sb)
	out, err := s.update(ctx, sb) // store.ErrConflict: the caller reads again
	if err != nil {
		return ResizeResult{}, err
	}
	return s.resized(ctx, out, ResizeResult{AppliesAt: "pending", Requested: r}), nil
}

// resizeLive applies a resize to a running sandbox and updates sb to what
// it has afterwards.
func (s *Service) resizeLive(ctx context.Context, sb *sandbox.Sandbox, r ResizeRequest, res *ResizeResult) error {
	if r.DiskGB != nil {
		if *r.DiskGB > sb.DiskGB {
			if err := s.host.GrowDisk(ctx, sb.ID, *r.DiskGB); err != nil {
				return &DiskGrowError{Reason: err.Error()}
			}
			sb.DiskGB = *r.DiskGB
		}
		return nil
	}
	if why := s.noLiveResize(sb.Runtime); why != "" {
		return &NotResizableError{ID: sb.ID, Reason: fmt.Sprintf("its runtime class (%s) cannot change cpu or ram_mb live: %s", sb.Runtime, why)}
	}
	live := sb.Live
	if live == nil {
		return &NotResizableError{ID: sb.ID, Reason: "it booted before live resize was available"}
	}
	cpu, ram := sb.CPU, sb.RAMMB
	if r.CPU != nil {
		if *r.CPU > live.MaxCPU {
			return &NotResizableError{ID: sb.ID, Reason: fmt.Sprintf("cpu %g is above this boot's maximum of %g", *r.CPU, live.MaxCPU)}
		}
		cpu = *r.CPU
	}
	if r.RAMMB != nil {
		if *r.RAMMB > live.MaxRAMMB {
			return &NotResizableError{ID: sb.ID, Reason: fmt.Sprintf("ram_mb %d is above this boot's maximum of %d", *r.RAMMB, live.MaxRAMMB)}
		}
		// Memory goes no lower than the boot size.
		ram = max(*r.RAMMB, live.BootRAMMB)
		res.Partial = *r.RAMMB < live.BootRAMMB
	}
	err := s.host.Resize(ctx, sb.ID, cpu, ram)
	if errors.Is(err, sandbox.ErrUnavailable) {
		return &NotResizableError{ID: sb.ID, Reason: fmt.Sprintf("its runtime class (%s) cannot change cpu or memory live", sb.Runtime)}
	}
	if errors.Is(err, sandbox.ErrConflict) && ram < sb.RAMMB {
		// The sandbox could not free that much memory: keep what it has.
		ram, res.Partial = sb.RAMMB, true
		err = s.host.Resize(ctx, sb.ID, cpu, ram)
	}
	if err != nil {
		return fmt.Errorf("live resize: %w", err)
	}
	sb.CPU, sb.RAMMB = cpu, ram
	res.Guest = s.guestSize(ctx, *sb)
	return nil
}

// noLiveResize is why the host's runtime class cannot resize a running
// sandbox live ("" when it can), checked before anything changes so the
// record keeps the size the guest really has.
func (s *Service) noLiveResize(class string) string {
	for _, c := range s.host.Info().Classes {
		if c.Name == class {
			return c.NoLiveResize
		}
	}
	return ""
}

// guestSize asks the sandbox's agent what it sees now, so the answer to a
// live resize reports the guest's view (a sandbox cannot have more CPUs
// online than the host has cores, whatever it asked for). nil when the
// agent does not answer within a second; the resize itself is done.
func (s *Service) guestSize(ctx context.Context, sb sandbox.Sandbox) *GuestSize {
	if sb.Address == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	g, err := s.agent(sb.ID, sb.Address, sb.AgentToken).Size(ctx)
	if err != nil || g.CPUsOnline < 1 || g.MemTotalMB == 0 {
		s.log.DebugContext(ctx, "guest size after a live resize", "sandbox", sb.ID, "err", err)
		return nil
	}
	return &GuestSize{CPUsOnline: g.CPUsOnline, MemTotalMB: int(g.MemTotalMB)}
}

// autogrow grows the disk of a running sandbox that passed 90% used, by
// half and at least 10 GB, up to DiskAutogrowMaxGB; billed at the new size
// from then on (a resize event).
func (s *Service) autogrow(ctx context.Context, sb sandbox.Sandbox) {
	limit := s.cfg.DiskAutogrowMaxGB
	if limit <= 0 || sb.DiskGB >= limit {
		return
	}
	used, size, err := s.diskUsage(ctx, sb.ID)
	if err != nil || size == 0 || float64(used) < 0.9*float64(size) {
		return
	}
	newGB := min(limit, sb.DiskGB+max(sb.DiskGB/2, 10))
	if _, err := s.Resize(ctx, Principal{OrgID: sb.OrgID}, sb.ID, ResizeRequest{DiskGB: &newGB}); err != nil {
		s.log.WarnContext(ctx, "disk autogrow", "sandbox", sb.ID, "err", err)
		return
	}
	s.log.InfoContext(ctx, "disk autogrow", "sandbox", sb.ID, "from_gb", sb.DiskGB, "to_gb", newGB)
}

// diskUsage asks the host the cheap way when it can, else through Metrics.
func (s *Service) diskUsage(ctx context.Context, id string) (used, size uint64, err error) {
	if r, ok := s.host.(DiskUsageReader); ok {
		return r.DiskUsage(ctx, id)
	}
	m, err := s.host.Metrics(ctx, id)
	return m.DiskUsedBytes, m.DiskSizeBytes, err
}

// DiskGrowError is a running sandbox's disk that could not grow online;
// its size is unchanged. Stopping and resizing grows it at the next boot.
type DiskGrowError struct{ Reason string }

func (e *DiskGrowError) Error() string {
	return "the disk could not grow online (" + e.Reason + "); it keeps its size: stop the sandbox, resize it, and start it"
}

// Unwrap makes errors.Is(err, sandbox.ErrConflict) hold.
func (e *DiskGrowError) Unwrap() error { return sandbox.ErrConflict }
