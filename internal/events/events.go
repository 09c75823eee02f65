// Package events is the event feed and what reads it: an org's events
// (state changes, session status changes, host events, artifacts) read
// page by page or waited for, and webhooks that receive them as signed
// HTTP deliveries, retried until they succeed (docs/events-and-webhooks.md).
// The core and the other parts write events through the store; a Feed
// wrapped around that store wakes readers when an event commits.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/syncs"
	"github.com/platinum-dev/platinum/internal/tenancy"
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
func (s *Service) Events(ctx context.Context, p tenancy.Principal, f EventFilter, after int64, limit int) ([]Event, int64, error) {
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
func (s *Service) WaitEvents(ctx context.Context, p tenancy.Principal, f EventFilter, after int64, wait time.Duration) ([]Event, int64, error) {
	var evs []Event
	_, err := syncs.Wait(ctx, wait, s.cfg.PollInterval, s.feed.Wake, func() (bool, error) {
		var next int64
		var err error
		evs, next, err = s.Events(ctx, p, f, after, MaxEventPage)
		after = next
		return len(evs) > 0, err
	})
	return evs, after, err
}

// Feed wakes event readers (SSE streams, the webhook dispatcher) when this
// process commits an event. Wrap the store every part writes through with
// it; writers in other processes are covered by the readers' backstop poll.
type Feed struct{ n syncs.Notifier }

// Wake returns a channel closed by the next commit that may have appended
// an event. Take it before reading, so a commit in between still wakes.
func (f *Feed) Wake() <-chan struct{} { return f.n.Channel("") }

func (f *Feed) broadcast() { f.n.Broadcast("") }

// Notify wakes the feed's readers for a commit another process made (the
// PostgreSQL store's ListenEvents calls it).
func (f *Feed) Notify() { f.broadcast() }

// Wrap returns st with every write that may append an event (a state
// change, ModifySandbox, AddEvent) waking f once it has committed.
func (f *Feed) Wrap(st store.Store) store.Store { return feedStore{Store: st, feed: f} }

// feedStore is a store whose event-writing commits wake a feed.
type feedStore struct {
	store.Store
	feed *Feed
}

// UpdateSandbox implements store.Store.
func (f feedStore) UpdateSandbox(ctx context.Context, sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	out, err := f.Store.UpdateSandbox(ctx, sb)
	if err == nil {
		f.feed.broadcast()
	}
	return out, err
}

// ModifySandbox implements store.Store.
func (f feedStore) ModifySandbox(ctx context.Context, orgID, id string, fn func(*sandbox.Sandbox) error) (sandbox.Sandbox, error) {
	out, err := f.Store.ModifySandbox(ctx, orgID, id, fn)
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
