package sandbox

import "time"

// Status is a sandbox's lifecycle as docs/lifecycle.md shows it: a coarser, more
// user-facing view than State that also reflects activity and the TTL.
// It is derived on every read (never stored), see StatusOf.
type Status string

// The statuses (docs/lifecycle.md, "Status").
const (
	StatusCreating  Status = "creating"
	StatusStarting  Status = "starting"
	StatusReady     Status = "ready"
	StatusRunning   Status = "running"
	StatusIdle      Status = "idle"
	StatusExpiring  Status = "expiring"
	StatusDestroyed Status = "destroyed"
	StatusFailed    Status = "failed"
)

// Defaults of the activity windows StatusOf uses.
const (
	// DefaultIdleAfter is how long a running sandbox must see no exec,
	// file or preview traffic to show idle.
	DefaultIdleAfter = 5 * time.Minute
	// DefaultExpiringWindow is the last minute before the TTL
	// runs out, during which a live sandbox shows expiring.
	DefaultExpiringWindow = time.Minute
)

// StatusInput is what StatusOf needs beyond the record: activity lives in
// memory on the API node, not in the store.
type StatusInput struct {
	Now time.Time
	// Busy is the number of commands in flight in the sandbox.
	Busy int
	// LastActivity is the last exec, file or preview traffic; zero means
	// none since create.
	LastActivity time.Time
	// IdleAfter and ExpiringWindow default to DefaultIdleAfter and
	// DefaultExpiringWindow when zero.
	IdleAfter, ExpiringWindow time.Duration
}

// StatusOf maps a record to its status:
//
//	deleting, deleted                     → destroyed
//	failed                                → failed
//	live with expires_at ≤ now+window     → expiring (before anything below)
//	creating                              → creating
//	starting, restoring                   → starting
//	running with a command in flight      → running
//	running, no activity for IdleAfter    → idle
//	running otherwise                     → ready
//	stopping, stopped, archiving, archived → idle (nothing runs; a start or
//	                                         preview request brings it back)
func StatusOf(sb Sandbox, in StatusInput) Status {
	if in.IdleAfter <= 0 {
		in.IdleAfter = DefaultIdleAfter
	}
	if in.ExpiringWindow <= 0 {
		in.ExpiringWindow = DefaultExpiringWindow
	}
	switch sb.State {
	case StateDeleting, StateDeleted:
		return StatusDestroyed
	case StateFailed:
		return StatusFailed
	}
	if sb.ExpiresAt != nil && !in.Now.Before(sb.ExpiresAt.Add(-in.ExpiringWindow)) {
		return StatusExpiring
	}
	switch sb.State {
	case StateCreating:
		return StatusCreating
	case StateStarting, StateRestoring:
		return StatusStarting
	case StateRunning:
		last := in.LastActivity
		if sb.LastActivityAt != nil && sb.LastActivityAt.After(last) {
			last = *sb.LastActivityAt
		}
		if last.IsZero() {
			last = sb.CreatedAt
		}
		switch {
		case in.Busy > 0:
			return StatusRunning
		case in.Now.Sub(last) >= in.IdleAfter:
			return StatusIdle
		}
		return StatusReady
	}
	return StatusIdle
}
