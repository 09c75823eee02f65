package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Event is one entry of an org's event feed, as GET /v1/events and
// webhooks send it. Data is the event's own JSON (for state_changed:
// {"from","to","reason"}).
type Event struct {
	ID        int64           `json:"id"`
	Type      string          `json:"type"`
	SandboxID string          `json:"sandbox_id,omitempty"`
	OrgID     string          `json:"org_id"`
	Data      json.RawMessage `json:"data"`
	// CreatedAt is sandbox.TimeFormat (UTC, microseconds), like every
	// time the API returns.
	CreatedAt string `json:"created_at"`
}

func eventFrom(e store.Event) Event {
	data := json.RawMessage(e.Data)
	if !json.Valid(data) {
		data = json.RawMessage("{}")
	}
	return Event{ID: e.ID, Type: e.Type, SandboxID: e.SandboxID, OrgID: e.OrgID, Data: data, CreatedAt: sandbox.FormatTime(e.CreatedAt)}
}

// EventFilter selects events of the caller's org. Empty fields match
// everything; set fields must all match.
type EventFilter struct {
	SandboxID string
	// Types keeps only events of these types.
	Types []string
	// SessionID, WorkflowID, AgentSessionID and VaultID match the same
	// keys of the event's data (session events carry them).
	SessionID, WorkflowID, AgentSessionID, VaultID string
}

// matchData reports whether the event's data has every context key the
// filter sets.
func (f EventFilter) matchData(data string) bool {
	want := map[string]string{"session_id": f.SessionID, "workflow_id": f.WorkflowID,
		"agent_session_id": f.AgentSessionID, "vault_id": f.VaultID}
	var m map[string]any
	decoded := false
	for k, v := range want {
		if v == "" {
			continue
		}
		if !decoded {
			if json.Unmarshal([]byte(data), &m) != nil {
				return false
			}
			decoded = true
		}
		if s, _ := m[k].(string); s != v {
			return false
		}
	}
	return true
}

// Limits of the event feed.
const (
	// MaxEventPage caps one page of GET /v1/events?format=json.
	MaxEventPage = 1000
	// eventScan is how many rows one store read scans for a filtered feed.
	eventScan = 500
)

// Events returns up to limit events of the caller's org after the cursor
// `after` that match f, oldest first, and the cursor to continue from
// (past every row scanned, so rows the filter skipped are not read again).
func (s *Service) Events(ctx context.Context, p Principal, f EventFilter, after int64, limit int) ([]Event, int64, error) {
	if p.SandboxID != "" {
		return nil, after, fmt.Errorf("a sandbox's token cannot read the org's event feed: %w", sandbox.ErrForbidden)
	}
	if after < 0 {
		return nil, after, &sandbox.FieldError{Field: "after", Reason: "must be an event ID (0 or more)"}
	}
	if limit <= 0 || limit > MaxEventPage {
		limit = MaxEventPage
	}
	if err := s.checkCursor(ctx, after); err != nil {
		return nil, after, err
	}
	out := []Event{}
	for len(out) < limit {
		rows, err := s.store.ListEvents(ctx, store.EventQuery{OrgID: p.OrgID, AfterID: after, SandboxID: f.SandboxID,
			Types: f.Types, Limit: eventScan})
		if err != nil {
			return nil, after, err
		}
		for _, e := range rows {
			if len(out) == limit {
				return out, after, nil
			}
			after = e.ID
			if f.matchData(e.Data) {
				out = append(out, eventFrom(e))
			}
		}
		if len(rows) < eventScan {
			break
		}
	}
	return out, after, nil
}

// WaitEvents returns the events after `after` that match f as soon as
// there are any, or none once wait has passed; either way it returns the
// cursor to continue from. It wakes on events this process commits and
// re-reads on a backstop poll for writers it does not see.
func (s *Service) WaitEvents(ctx context.Context, p Principal, f EventFilter, after int64, wait time.Duration) ([]Event, int64, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	for {
		changed := s.feed.channel() // before the read: a commit after it still wakes us
		evs, next, err := s.Events(ctx, p, f, after, MaxEventPage)
		if err != nil || len(evs) > 0 {
			return evs, next, err
		}
		after = next
		select {
		case <-changed:
		case <-poll.C:
		case <-deadline.C:
			return evs, after, nil
		case <-ctx.Done():
			return evs, after, ctx.Err()
		}
	}
}

// feed wakes event subscribers (SSE streams, the webhook dispatcher) when
// this process commits an event.
type feed struct {
	mu sync.Mutex
	ch chan struct{}
}

func newFeed() *feed { return &feed{ch: make(chan struct{})} }

// channel returns a channel closed by the next broadcast.
func (f *feed) channel() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ch
}

func (f *feed) broadcast() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.ch)
	f.ch = make(chan struct{})
}

// feedStore is the store as the service uses it: every write that may
// append an event (a state change, AddEvent) wakes the feed once it has
// committed, whoever in the control plane made it.
type feedStore struct {
	store.Store
	feed *feed
}

// UpdateSandbox implements store.Store.
func (f feedStore) UpdateSandbox(ctx context.Context, sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	out, err := f.Store.UpdateSandbox(ctx, sb)
	if err == nil {
		f.feed.broadcast()
	}
	return out, err
}

// AddEvent implements store.Store.
func (f feedStore) AddEvent(ctx context.Context, orgID, sandboxID, typ string, data any) error {
	err := f.Store.AddEvent(ctx, orgID, sandboxID, typ, data)
	if err == nil {
		f.feed.broadcast()
	}
	return err
}
