package platinum

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Event is one entry of the org's event feed: a sandbox state change
// ("state_changed", Data {"from","to","reason"}), a session status change
// ("session_status_changed") or a host event. IDs only grow, so the last
// ID seen is where to resume.
type Event struct {
	ID        int64           `json:"id"`
	Type      string          `json:"type"`
	SandboxID string          `json:"sandbox_id,omitempty"`
	OrgID     string          `json:"org_id"`
	Data      json.RawMessage `json:"data"`
	CreatedAt time.Time       `json:"created_at"`
}

// EventStateChanged is the Type of a sandbox's state change.
const EventStateChanged = "state_changed"

// StateChange decodes a state_changed event's data; ok is false for other
// events.
func (e Event) StateChange() (from, to State, reason string, ok bool) {
	if e.Type != EventStateChanged {
		return "", "", "", false
	}
	var d struct {
		From   State  `json:"from"`
		To     State  `json:"to"`
		Reason string `json:"reason"`
	}
	if json.Unmarshal(e.Data, &d) != nil {
		return "", "", "", false
	}
	return d.From, d.To, d.Reason, true
}

// EventFilter selects events; empty fields match everything.
type EventFilter struct {
	SandboxID string
	// Types keeps only these event types.
	Types []string
	// SessionID, WorkflowID, AgentSessionID and VaultID match the same
	// keys of session events' data.
	SessionID, WorkflowID, AgentSessionID, VaultID string
}

func (f EventFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"sandbox_id": f.SandboxID, "session_id": f.SessionID, "workflow_id": f.WorkflowID,
		"agent_session_id": f.AgentSessionID, "vault_id": f.VaultID, "type": strings.Join(f.Types, ",")} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// EventsService reads the org's event feed. Get it from Client.Events.
type EventsService struct {
	c *Client
}

// List returns up to limit events after the cursor `after` (0: from the
// oldest) and the cursor to pass next time. It does not wait.
func (s *EventsService) List(ctx context.Context, f EventFilter, after int64, limit int) ([]Event, int64, error) {
	q := f.query()
	q.Set("format", "json")
	q.Set("after", strconv.FormatInt(after, 10))
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Rows      []Event `json:"rows"`
		NextAfter int64   `json:"next_after"`
	}
	if _, err := s.c.doJSON(ctx, "GET", "/v1/events", q, nil, &out); err != nil {
		return nil, after, fmt.Errorf("list events: %w", err)
	}
	if out.Rows == nil {
		out.Rows = []Event{}
	}
	return out.Rows, out.NextAfter, nil
}

// EventStream is an open Server-Sent Events stream. Read it with Next and
// close it with Close.
type EventStream struct {
	resp   *http.Response
	sc     *bufio.Scanner
	lastID int64
}

// Stream opens the event stream after the cursor `after` (sent as
// Last-Event-ID): missed events come first, then new ones as they
// happen. It fails with an *APIError for a refused request.
func (s *EventsService) Stream(ctx context.Context, f EventFilter, after int64) (*EventStream, error) {
	req, err := s.c.newRequest(ctx, "GET", "/v1/events", f.query(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := s.c.send(req)
	if err != nil {
		return nil, fmt.Errorf("event stream: %w", err)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	return &EventStream{resp: resp, sc: sc, lastID: after}, nil
}

// Next blocks until the next event. It returns an error when the stream
// breaks or its context ends; LastID then says where to resume.
func (es *EventStream) Next() (Event, error) {
	var data strings.Builder
	for es.sc.Scan() {
		line := es.sc.Text()
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			var e Event
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				return Event{}, fmt.Errorf("event stream: decode: %w", err)
			}
			es.lastID = e.ID
			return e, nil
		case strings.HasPrefix(line, ":"):
			// comment: heartbeat
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := es.sc.Err(); err != nil {
		return Event{}, fmt.Errorf("event stream: %w", err)
	}
	return Event{}, fmt.Errorf("event stream: closed by the server")
}

// LastID is the ID of the last event Next returned (or the cursor the
// stream started after).
func (es *EventStream) LastID() int64 { return es.lastID }

// Close ends the stream.
func (es *EventStream) Close() error { return es.resp.Body.Close() }

// Follow calls fn with every event after the cursor `after`, in order,
// until ctx ends (it then returns ctx's error) or fn returns an error
// (returned as is). A broken connection is reopened with Last-Event-ID,
// so no event is missed or repeated; errors the server answers with
// (bad filter, forbidden token) end Follow.
func (s *EventsService) Follow(ctx context.Context, f EventFilter, after int64, fn func(Event) error) error {
	backoff := 250 * time.Millisecond
	for {
		es, err := s.Stream(ctx, f, after)
		if err != nil {
			var ae *APIError
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.As(err, &ae) && ae.StatusCode < 500 {
				return err
			}
		} else {
			for {
				e, err := es.Next()
				if err != nil {
					break
				}
				backoff = 250 * time.Millisecond
				after = e.ID
				if err := fn(e); err != nil {
					es.Close()
					return err
				}
			}
			es.Close()
		}
		if err := sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
