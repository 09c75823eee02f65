package fakeptd

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
)

// timers is a sandbox type's retention defaults.
type timers struct {
	typ                string
	stop, archive, del int
}

// retention returns the defaults of a sandbox type ("" is persistent),
// false for unknown types.
func retention(typ string) (timers, bool) {
	switch typ {
	case "", "persistent":
		return timers{"persistent", 60, 7, 0}, true
	case "ephemeral":
		return timers{"ephemeral", 15, 0, 0}, true
	case "dev":
		return timers{"dev", 120, 30, 0}, true
	}
	return timers{}, false
}

// lifecycleTargets maps a lifecycle verb to the state it leads to.
var lifecycleTargets = map[string]string{"stop": "stopped", "start": "running", "archive": "archived"}

// lifecycle handles stop (and pause), start (and resume) and archive the
// way ptd does: the transition, then an optional wait for its target
// (200 when reached, 409 sandbox_failed with the record when it failed,
// 202 wait_timed_out otherwise). Stop and start of a sandbox already there
// or on its way are no-ops answering 200; others (and archive of anything
// but a stopped sandbox) are 409 conflict with the state.
func (s *Server) lifecycle(verb string) http.HandlerFunc {
	target := lifecycleTargets[verb]
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		wait := q.Get("wait_for_state")
		if wait != "" && wait != target {
			writeErr(w, 400, "invalid_request", "wait_for_state must be one of "+target, "field", "wait_for_state")
			return
		}
		if v := q.Get("wait_timeout_ms"); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n <= 0 {
				writeErr(w, 400, "invalid_request", "wait_timeout_ms must be a positive integer", "field", "wait_timeout_ms")
				return
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		sb := s.lookup(w, r, false)
		if sb == nil {
			return
		}
		var next, want string
		switch verb {
		case "stop":
			switch sb.State {
			case "running", "failed":
				next = "stopping"
			case "stopped", "stopping", "archiving", "archived":
			default:
				want = "running or failed"
			}
		case "start":
			switch sb.State {
			case "stopped", "failed":
				next = "starting"
			case "archived":
				next = "restoring"
			case "running", "starting", "creating", "restoring":
			default:
				want = "stopped, archived or failed"
			}
		case "archive":
			// Stopped only: archiving an archived sandbox is a conflict too.
			if sb.State == "stopped" {
				next = "archiving"
			} else {
				want = "stopped"
			}
		}
		if want != "" {
			writeErr(w, 409, "conflict", fmt.Sprintf("sandbox is %s; this needs it %s", sb.State, want), "state", sb.State)
			return
		}
		if next != "" {
			sb.from, sb.State, sb.Reason, sb.pollsLeft = sb.State, next, "", s.LifecyclePolls
			sb.Restore, sb.RAMRestored = nil, nil
			sb.UpdatedAt = Time{s.now()}
			s.track(sb, sb.UpdatedAt.Time)
		}
		if wait == "" {
			writeJSON(w, 200, sb)
			return
		}
		s.advance(sb)
		switch sb.State {
		case target:
			writeJSON(w, 200, sb)
		case "failed":
			writeFailed(w, sb, target)
		default:
			writeTimedOut(w, sb)
		}
	}
}

// advanceLifecycle ends a stop, start, archive or restore whose polls are
// used up. Callers hold mu.
func (s *Server) advanceLifecycle(sb *Sandbox) {
	var to string
	switch sb.State {
	case "stopping":
		to = "stopped"
	case "starting", "restoring":
		to = "running"
	case "archiving":
		to = "archived"
	default:
		return
	}
	now := Time{s.now()}
	sb.UpdatedAt = now
	defer s.track(sb, now.Time)
	switch {
	case s.LifecycleFailReason != "":
		sb.State, sb.Reason = "failed", s.LifecycleFailReason
	case s.InterruptReason != "":
		sb.State, sb.Reason = sb.from, s.InterruptReason
	case to == "stopped" && sb.Type == "ephemeral":
		// Ephemeral sandboxes are deleted when they stop.
		sb.State, sb.DeletedAt, sb.Reason, sb.DeletedReason = "deleted", &now, "auto_deleted", "auto_deleted"
	case to == "running":
		restore := "memory"
		if sb.State == "restoring" || s.StartRestore == "disk_only" {
			restore = "disk_only"
		}
		ram := restore == "memory"
		sb.State, sb.Restore, sb.RAMRestored = to, &restore, &ram
		sb.bootRAMMB = sb.RAMMB
		last, _ := json.Marshal(map[string]any{"restore": restore, "ram_restored": ram, "at": now})
		md := maps.Clone(sb.Metadata)
		md["last_start"] = string(last)
		sb.Metadata = md
	default:
		sb.State = to
	}
}

// writeFailed answers a wait that ended with the sandbox failed as ptd
// does: 409 sandbox_failed, the body the record plus code and error.
func writeFailed(w http.ResponseWriter, sb *Sandbox, target string) {
	m := map[string]any{}
	if b, err := json.Marshal(sb); err == nil {
		json.Unmarshal(b, &m)
	}
	m["code"] = "sandbox_failed"
	m["error"] = fmt.Sprintf("sandbox %s failed before it was %s: %s; start it again or delete it", sb.ID, target, sb.Reason)
	writeJSON(w, 409, m)
}
