package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/events"
)

// streams lets Shutdown end every open event stream: http.Server's
// Shutdown waits for active requests, and a stream is active forever.
type streams struct {
	mu     sync.Mutex
	done   chan struct{}
	closed bool
}

func (s *streams) ch() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
	}
	return s.done
}

// Shutdown ends open event streams (clients reconnect with Last-Event-ID
// to the next server). Register it with http.Server.RegisterOnShutdown.
func (a *API) Shutdown() {
	a.streams.ch()
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	if !a.streams.closed {
		a.streams.closed = true
		close(a.streams.done)
	}
}

// heartbeat is how often an idle event stream writes a comment line, so
// proxies and load balancers do not close it.
const heartbeat = 15 * time.Second

// eventFilter reads GET /v1/events's filters and cursor. Last-Event-ID
// (what an EventSource sends when it reconnects) wins over ?after=.
func eventFilter(r *http.Request) (events.EventFilter, int64, error) {
	q := r.URL.Query()
	f := events.EventFilter{SandboxID: q.Get("sandbox_id"), SessionID: q.Get("session_id"),
		WorkflowID: q.Get("workflow_id"), AgentSessionID: q.Get("agent_session_id"), VaultID: q.Get("vault_id")}
	for _, v := range q["type"] {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				f.Types = append(f.Types, t)
			}
		}
	}
	var after int64
	cursor, field := q.Get("after"), "after"
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		cursor, field = h, "Last-Event-ID"
	}
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || n < 0 {
			return f, 0, badRequest(field+" must be an event ID (a non-negative integer)", field)
		}
		after = n
	}
	return f, after, nil
}

// events is GET /v1/events: a Server-Sent Events stream of the caller's
// org, or one JSON page with ?format=json.
func (a *API) events(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	f, after, err := eventFilter(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	switch q.Get("format") {
	case "json":
		limit, err := intParam(q.Get("limit"), "limit", 100, 1, events.MaxEventPage)
		if err != nil {
			return err
		}
		evs, next, err := a.ev.Events(r.Context(), p, f, after, limit)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"rows": evs, "next_after": next})
		return nil
	case "", "sse":
	default:
		return badRequest("format must be sse (the default) or json", "format")
	}
	beat := heartbeat
	if v := q.Get("heartbeat_ms"); v != "" {
		ms, err := intParam(v, "heartbeat_ms", 0, 100, 60000)
		if err != nil {
			return err
		}
		beat = time.Duration(ms) * time.Millisecond
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("event stream: response writer cannot flush")
	}
	// The backlog first: errors (a forbidden token) still get a JSON body.
	evs, next, err := a.ev.Events(r.Context(), p, f, after, events.MaxEventPage)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n: connected\n\n"); err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-a.streams.ch():
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		if len(evs) == 0 {
			_, err = fmt.Fprint(w, ": heartbeat\n\n")
		}
		for _, e := range evs {
			if err = writeSSE(w, e); err != nil {
				break
			}
		}
		if err != nil {
			return nil // the client went away
		}
		flusher.Flush()
		after = next
		evs, next, err = a.ev.WaitEvents(ctx, p, f, after, beat)
		if err != nil {
			if ctx.Err() == nil {
				a.log.WarnContext(r.Context(), "event stream", "err", err)
			}
			return nil
		}
	}
}

// writeSSE writes one event: id is the store's event ID (the resume
// cursor), event its type, data its JSON on one line.
func writeSSE(w http.ResponseWriter, e events.Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, sseField(e.Type), b)
	return err
}

// sseField keeps a value on one SSE line.
func sseField(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }

// intParam parses an optional integer query parameter within [lo, hi].
func intParam(v, name string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(fmt.Sprintf("%s must be an integer from %d to %d", name, lo, hi), name)
	}
	return n, nil
}
