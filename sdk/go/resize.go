package platinum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ResizeRequest is a new size for a sandbox. Nil fields keep their size.
// DiskGB only grows, and for a running sandbox it changes in a call of its
// own: ptd refuses DiskGB together with CPU or RAMMB (invalid_request).
type ResizeRequest struct {
	CPU    *float64 `json:"cpu,omitempty"`
	RAMMB  *int     `json:"ram_mb,omitempty"`
	DiskGB *int     `json:"disk_gb,omitempty"`
}

// ResizeApplies says when a resize takes effect.
type ResizeApplies string

// When a resize takes effect.
const (
	// ResizeNow: a running sandbox has the new size when the call returns
	// (new vCPUs and memory are online inside the guest).
	ResizeNow ResizeApplies = "now"
	// ResizeNextStart: a stopped sandbox boots at the new size; its disk
	// survives, in-memory state does not.
	ResizeNextStart ResizeApplies = "next_start"
	// ResizePending: the host has not finished yet (an HTTP 202); read the
	// sandbox for its size.
	ResizePending ResizeApplies = "pending"
)

// ResizeResult is what a sandbox has after a resize. You are billed for
// what it has (CPU, RAMMB, DiskGB), not for what was requested.
type ResizeResult struct {
	ID     string  `json:"id"`
	State  State   `json:"state"`
	CPU    float64 `json:"cpu"`
	RAMMB  int     `json:"ram_mb"`
	DiskGB int     `json:"disk_gb"`
	// AppliesAt says when the size takes effect.
	AppliesAt ResizeApplies `json:"applies_at"`
	// Requested echoes the fields the call asked for.
	Requested ResizeRequest `json:"requested"`
	// Partial is true when a memory shrink freed less than asked: RAMMB
	// is what the sandbox still has.
	Partial bool `json:"partial"`
	// Live is the running sandbox's headroom and what its guest sees; nil
	// when the sandbox is not running.
	Live *LiveResize `json:"live,omitempty"`
}

// LiveResize is a running sandbox's live-resize headroom, fixed when it
// booted, and what its guest sees now.
type LiveResize struct {
	// MaxCPU and MaxRAMMB are the most this boot can grow to live; a
	// cold-booted resize (stop, resize, start) sets new headroom.
	MaxCPU   float64 `json:"max_cpu"`
	MaxRAMMB int     `json:"max_ram_mb"`
	// GuestCPUsOnline is what nproc counts inside the sandbox.
	GuestCPUsOnline int `json:"guest_cpus_online"`
	// GuestMemTotalMB is MemTotal inside the sandbox: its size less the
	// kernel's own bookkeeping.
	GuestMemTotalMB int `json:"guest_mem_total_mb"`
}

// LiveResizeStatus says whether a running sandbox can be resized live,
// and why not.
type LiveResizeStatus struct {
	Supported bool   `json:"supported"`
	Reason    string `json:"reason"`
}

// ResizeHint is what to do instead of a live resize.
type ResizeHint struct {
	// Action is "stop_then_resize".
	Action string `json:"action"`
	// AppliesAt is "restart": the size takes effect when the sandbox
	// boots again, without its in-memory state.
	AppliesAt string `json:"applies_at"`
	// Steps are the API calls to make, in order, e.g.
	// "POST /v1/sandboxes/sbx_…/stop".
	Steps []string `json:"steps"`
}

// NotResizableError is Resize's error when a running sandbox cannot
// change CPU or RAMMB live: beyond the headroom it booted with, on a host
// or agent without live resize, or booted before it had one. Find it with
// errors.As; it wraps the *APIError (code sandbox_not_resizable).
type NotResizableError struct {
	// LiveResize has the reason live resize is refused.
	LiveResize LiveResizeStatus
	// Hint says how to resize anyway: stop the sandbox, then resize it.
	Hint ResizeHint

	err *APIError
}

// Error returns the server's message, which names the reason.
func (e *NotResizableError) Error() string { return e.err.Error() }

// Unwrap exposes the *APIError, so IsCode and errors.As see it.
func (e *NotResizableError) Unwrap() error { return e.err }

// notResizable reads the extra fields of a sandbox_not_resizable answer.
func notResizable(ae *APIError) *NotResizableError {
	e := &NotResizableError{err: ae}
	b, _ := json.Marshal(ae.Body)
	var extra struct {
		LiveResize LiveResizeStatus `json:"live_resize"`
		Hint       ResizeHint       `json:"hint"`
	}
	if json.Unmarshal(b, &extra) == nil {
		e.LiveResize, e.Hint = extra.LiveResize, extra.Hint
	}
	return e
}

// Resize changes the sandbox's size. A running sandbox grows DiskGB in
// place, and changes CPU and RAMMB live within the headroom it booted
// with (AppliesAt ResizeNow); when it cannot, the error is a
// *NotResizableError whose Hint says to stop it, then resize. A stopped
// sandbox records the size and boots at it next time (ResizeNextStart),
// or answers ResizePending while its host finishes.
//
// Other errors are APIErrors: invalid_request for a disk shrink, DiskGB
// together with CPU or RAMMB, or a bad value (Field names it);
// disk_grow_unsupported when the guest cannot grow its filesystem online;
// conflict when the sandbox is in a state that cannot be resized (State).
func (s *SandboxesService) Resize(ctx context.Context, id string, req ResizeRequest) (*ResizeResult, error) {
	if req.CPU == nil && req.RAMMB == nil && req.DiskGB == nil {
		return nil, fmt.Errorf("resize sandbox %s: nothing to change: set CPU, RAMMB or DiskGB", id)
	}
	var out ResizeResult
	if _, err := s.c.doJSON(ctx, "POST", sandboxPath(id)+"/resize", nil, req, &out); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Code == CodeSandboxNotResizable {
			err = notResizable(ae)
		}
		return nil, fmt.Errorf("resize sandbox %s: %w", id, err)
	}
	return &out, nil
}
