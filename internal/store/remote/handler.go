package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/store"
)

// maxRequest bounds a call's body: the largest records (a build's log, an
// idempotent answer) are capped far below it.
const maxRequest = 64 << 20

// keepalive is how often a quiet stream (a held lock, the commit stream)
// writes a line, so that a client notices a server that vanished.
const keepalive = 15 * time.Second

// Lines of the streams.
const (
	lineLocked = "locked"
	lineReady  = "ready"
	lineCommit = "commit"
	linePing   = "ping"
)

// NewHandler serves st's methods to remote Clients. authorize decides
// each request (ptd checks a host token); a refused request gets 401 and
// nothing runs (a nil authorize refuses every request). listen, when non-nil, is how the handler learns of
// commits: it calls notify on every commit anywhere until ctx ends; the
// handler runs one listen while any Client follows the commit stream
// (Client.ListenEvents) and passes each commit on to all of them. Mount
// the handler at Prefix (with or without the prefix stripped).
func NewHandler(st store.Store, authorize func(*http.Request) bool, listen func(ctx context.Context, notify func()), log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &handler{st: reflect.ValueOf(&st).Elem(), store: st, authorize: authorize, log: log, hub: &hub{listen: listen}}
}

type handler struct {
	store     store.Store
	st        reflect.Value // store as an interface value, for Method(i)
	authorize func(*http.Request) bool
	log       *slog.Logger
	hub       *hub
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.authorize == nil || !h.authorize(r) {
		h.log.Warn("remote store: refused a request without a valid host token", "remote", r.RemoteAddr, "path", r.URL.Path)
		writeError(w, http.StatusUnauthorized, &wireError{Code: "unauthenticated",
			Message: "the host token was refused: give the host the token the api ptd was started with"})
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		name = strings.TrimPrefix(r.URL.Path, "/")
	}
	switch {
	case name == "" || name == strings.Trim(Prefix, "/"):
		// Dial's check: the endpoint is there and took the token.
		writeJSON(w, http.StatusOK, ping{Contract: contract})
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, &wireError{Code: codeBadCall, Message: "store calls are POST"})
		return
	case name == eventsPath:
		h.events(w, r)
		return
	case name == "LockKey":
		h.lockKey(w, r)
		return
	}
	m := methods[name]
	if m == nil {
		writeError(w, http.StatusNotFound, &wireError{Code: codeUnknownMethod,
			Message: fmt.Sprintf("the api ptd serves no store method %q: run the same ptd version on the api and its hosts", name)})
		return
	}
	args, err := readArgs(r, w, m.in)
	if err != nil {
		writeError(w, http.StatusBadRequest, &wireError{Code: codeBadCall, Message: fmt.Sprintf("%s: %v", name, err)})
		return
	}
	in := append([]reflect.Value{reflect.ValueOf(r.Context())}, args...)
	var out []reflect.Value
	if m.variadic {
		out = h.st.Method(m.index).CallSlice(in)
	} else {
		out = h.st.Method(m.index).Call(in)
	}
	if err, _ := out[len(out)-1].Interface().(error); err != nil {
		we, status := toWire(err)
		h.log.Debug("remote store call failed", "method", name, "err", err)
		writeError(w, status, we)
		return
	}
	a := answer{Results: make([]any, len(m.out))}
	for i := range m.out {
		if a.Results[i], err = encode(out[i]); err != nil {
			writeError(w, http.StatusInternalServerError, &wireError{Code: codeInternal, Message: fmt.Sprintf("%s: %v", name, err)})
			return
		}
	}
	writeJSON(w, http.StatusOK, a)
}

// readArgs reads a call's body, a JSON array of the arguments after ctx,
// into values of the parameter types.
func readArgs(r *http.Request, w http.ResponseWriter, types []reflect.Type) ([]reflect.Value, error) {
	var raw []json.RawMessage
	body := http.MaxBytesReader(w, r.Body, maxRequest)
	if err := json.NewDecoder(body).Decode(&raw); err != nil {
		return nil, fmt.Errorf("read the arguments: %w", err)
	}
	// Read to the end: only then does the server watch the connection,
	// ending the request's context when the client goes (what releases a
	// held lock).
	if _, err := io.Copy(io.Discard, body); err != nil {
		return nil, fmt.Errorf("read the arguments: %w", err)
	}
	if len(raw) != len(types) {
		return nil, fmt.Errorf("%d arguments, want %d", len(raw), len(types))
	}
	out := make([]reflect.Value, len(types))
	for i, t := range types {
		v := reflect.New(t).Elem()
		if err := decode(raw[i], v); err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+1, err)
		}
		out[i] = v
	}
	return out, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, we *wireError) {
	writeJSON(w, status, answer{Error: we})
}

// lockKey takes the lock, writes lineLocked and holds the lock until the
// request ends: the client's unlock cancels it, and a client that died
// takes its connection (and so the request's context) with it.
func (h *handler) lockKey(w http.ResponseWriter, r *http.Request) {
	args, err := readArgs(r, w, []reflect.Type{reflect.TypeFor[string]()})
	if err != nil {
		writeError(w, http.StatusBadRequest, &wireError{Code: codeBadCall, Message: "LockKey: " + err.Error()})
		return
	}
	key := args[0].String()
	unlock, err := h.store.LockKey(r.Context(), key)
	if err != nil {
		we, status := toWire(err)
		writeError(w, status, we)
		return
	}
	defer unlock()
	stream(w, r, lineLocked, nil)
}

// events streams a line for every commit the listen function reports,
// bursts coalesced, after a first lineReady.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	if h.hub.listen == nil {
		writeError(w, http.StatusNotImplemented, &wireError{Code: codeNoCommits,
			Message: "the api ptd passes on no commits: event readers fall back to polling"})
		return
	}
	ch, unsubscribe := h.hub.subscribe(r.Context())
	defer unsubscribe()
	stream(w, r, lineReady, ch)
}

// stream answers 200 with first as its first line, then a lineCommit for
// each receive from ch and a linePing at every keepalive, until the
// request ends or a write fails.
func stream(w http.ResponseWriter, r *http.Request, first string, ch <-chan struct{}) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	write := func(line string) bool {
		if _, err := fmt.Fprintln(w, line); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(first) {
		return
	}
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	for {
		line := linePing
		select {
		case <-r.Context().Done():
			return
		case <-ch:
			line = lineCommit
		case <-tick.C:
		}
		if !write(line) {
			return
		}
	}
}

// hub runs one listen while any client follows the commit stream and
// wakes every follower at each commit.
type hub struct {
	listen func(ctx context.Context, notify func())

	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	stop context.CancelFunc
	done chan struct{}
}

// subscribe adds a follower, starting listen for the first; ctx's values
// (not its end) go to listen. The channel holds at most one pending wake.
func (h *hub) subscribe(ctx context.Context) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if len(h.subs) == 0 {
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		h.stop, h.done = cancel, done
		go func() {
			defer close(done)
			h.listen(lctx, h.broadcast)
		}()
	}
	if h.subs == nil {
		h.subs = map[chan struct{}]struct{}{}
	}
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		var stop context.CancelFunc
		var done chan struct{}
		if len(h.subs) == 0 {
			stop, done = h.stop, h.done
			h.stop, h.done = nil, nil
		}
		h.mu.Unlock()
		if stop != nil {
			stop()
			<-done
		}
	}
}

func (h *hub) broadcast() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
