package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

//go:generate go run ./gen

// Client is a store.Store whose calls another process's store serves
// (NewHandler). It is safe for concurrent use.
type Client struct {
	base   string // baseURL + Prefix
	token  string
	hc     *http.Client
	log    *slog.Logger
	closed atomic.Bool
	// modifying queues this client's ModifySandbox calls per sandbox, so
	// that they do not race each other's compare-and-swap.
	modifying keyQueue
}

var _ store.Store = (*Client)(nil)

// ErrClosed is returned by the calls of a Client after Close.
var ErrClosed = errors.New("remote store: the client is closed")

// Dial returns a Client for the store served at baseURL+Prefix (baseURL
// like "http://127.0.0.1:8080"), sending "Authorization: Bearer <token>".
// It checks once that the server answers and takes the token, and says
// what to check when not.
func Dial(ctx context.Context, baseURL, token string, log *slog.Logger) (*Client, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Every call of a busy host goes to one api: keep enough connections.
	tr.MaxIdleConnsPerHost = 64
	c := &Client{
		base:  strings.TrimRight(baseURL, "/") + Prefix,
		token: token,
		hc:    &http.Client{Transport: tr},
		log:   log,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base, nil)
	if err != nil {
		return nil, fmt.Errorf("remote store: join URL %q: %w", baseURL, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("remote store at %s: %w", baseURL, ctx.Err())
		}
		return nil, fmt.Errorf("remote store: cannot reach the api ptd at %s (check the join URL and that the api ptd runs): %w: %v",
			baseURL, sandbox.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	var p ping
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&p)
	switch {
	case resp.StatusCode == http.StatusOK && err == nil && p.Contract != "":
		if p.Contract != contract {
			log.Warn("remote store: the api ptd's store contract is not this ptd's (their versions differ): calls of methods it lacks or declares otherwise will fail",
				"url", baseURL, "api_contract", p.Contract, "contract", contract)
		}
		return c, nil
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("remote store: the api ptd at %s refused the host token: give the host the token the api ptd was started with: %w",
			baseURL, sandbox.ErrUnauthenticated)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusOK:
		return nil, fmt.Errorf("remote store: %s serves no store at %s: check that the join URL is an api ptd's API listener (not its sandboxes' listener) of the same version: %w",
			baseURL, Prefix, sandbox.ErrNotFound)
	default:
		return nil, fmt.Errorf("remote store: the api ptd at %s answered %s: %w", baseURL, resp.Status, sandbox.ErrUnavailable)
	}
}

// Close closes the client's idle connections; later calls return
// ErrClosed. Calling it again is a no-op. The server's store stays open.
func (c *Client) Close() error {
	c.closed.Store(true)
	c.hc.CloseIdleConnections()
	return nil
}

// post sends a call to the server and returns its response when it has
// status 200; any other answer is the error it carries. A failure to
// reach the server, or an answer that is not the protocol's (a proxy's
// 502), wraps sandbox.ErrUnavailable.
func (c *Client) post(ctx context.Context, name string, args []any) (*http.Response, error) {
	if c.closed.Load() {
		return nil, fmt.Errorf("%s: %w", name, ErrClosed)
	}
	body, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+name, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", name, ctx.Err())
		}
		return nil, fmt.Errorf("%s: the api ptd's store does not answer: %w: %v", name, sandbox.ErrUnavailable, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	var a struct{ Error *wireError }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&a); err != nil || a.Error == nil {
		return nil, fmt.Errorf("%s: the api ptd's store answered %s: %w", name, resp.Status, sandbox.ErrUnavailable)
	}
	return nil, fromWire(a.Error)
}

// call makes the call name with args and decodes its results into the
// pointers in results.
func (c *Client) call(ctx context.Context, name string, args []any, results ...any) error {
	m := methods[name]
	if m == nil || len(args) != len(m.in) || len(results) != len(m.out) {
		return fmt.Errorf("remote store: no method %s(%d args) (%d results)", name, len(args), len(results)) // a bug in client_gen.go
	}
	wire := make([]any, len(args))
	for i, a := range args {
		v := reflect.New(m.in[i]).Elem()
		if a != nil {
			v.Set(reflect.ValueOf(a))
		}
		var err error
		if wire[i], err = encode(v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	resp, err := c.post(ctx, name, wire)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var a struct{ Results []any }
	if err := readTree(resp.Body, &a); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", name, ctx.Err())
		}
		return fmt.Errorf("%s: read the answer: %w: %v", name, sandbox.ErrUnavailable, err)
	}
	if len(a.Results) != len(results) {
		return fmt.Errorf("%s: %d results, want %d: run the same ptd version on the api and its hosts", name, len(a.Results), len(results))
	}
	for i, r := range results {
		if err := fromTree(a.Results[i], reflect.ValueOf(r).Elem()); err != nil {
			return fmt.Errorf("%s: result %d: %w", name, i+1, err)
		}
	}
	return nil
}

func call0(ctx context.Context, c *Client, name string, args ...any) error {
	return c.call(ctx, name, args)
}

func call1[A any](ctx context.Context, c *Client, name string, args ...any) (A, error) {
	var a A
	err := c.call(ctx, name, args, &a)
	if err != nil {
		var zero A
		return zero, err
	}
	return a, nil
}

func call2[A, B any](ctx context.Context, c *Client, name string, args ...any) (A, B, error) {
	var a A
	var b B
	err := c.call(ctx, name, args, &a, &b)
	if err != nil {
		var za A
		var zb B
		return za, zb, err
	}
	return a, b, nil
}

// ModifySandbox implements store.Store as a compare-and-swap loop, since
// fn cannot cross the wire: it reads the sandbox, applies fn and writes
// the result with UpdateSandbox at the version read. When that write
// conflicts it reads again: if the version moved, another writer came
// first and it starts over (fn runs again, on the fresh record); if not,
// the conflict was fn's name, taken by another sandbox, and it returns
// it. An error from fn is returned as is with nothing written. Calls of
// one Client on one sandbox queue for each other (as a local store's
// queue on the row lock), so only writers of other processes make it
// retry.
func (c *Client) ModifySandbox(ctx context.Context, orgID, id string, fn func(*sandbox.Sandbox) error) (sandbox.Sandbox, error) {
	leave, err := c.modifying.enter(ctx, id)
	if err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, err)
	}
	defer leave()
	for {
		cur, err := c.GetSandbox(ctx, orgID, id)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		keep := cur
		if err := fn(&cur); err != nil {
			return sandbox.Sandbox{}, err
		}
		cur.ID, cur.OrgID, cur.CreatedAt, cur.Version = keep.ID, keep.OrgID, keep.CreatedAt, keep.Version
		out, err := c.UpdateSandbox(ctx, cur)
		if !errors.Is(err, store.ErrConflict) {
			return out, err
		}
		again, gerr := c.GetSandbox(ctx, orgID, id)
		if gerr != nil {
			return sandbox.Sandbox{}, gerr
		}
		if again.Version == keep.Version {
			return sandbox.Sandbox{}, err
		}
	}
}

// LockKey implements store.Store with a held request: the server takes
// the lock, answers a first line, and holds the lock until the request
// ends. LockKey returns once that line came (ctx bounds the wait, as
// with a local store, but not the hold); unlock ends the request. A host
// that dies takes its connection, and so its lock, with it.
func (c *Client) LockKey(ctx context.Context, key string) (func(), error) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	fail := func(err error) (func(), error) {
		stop()
		cancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lock %q: %w", key, ctx.Err())
		}
		return nil, err
	}
	resp, err := c.post(rctx, "LockKey", []any{key})
	if err != nil {
		return fail(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if !stop() { // ctx ended: whatever the line, the caller gave up
		resp.Body.Close()
		return fail(nil)
	}
	if err != nil || strings.TrimSpace(line) != lineLocked {
		resp.Body.Close()
		return fail(fmt.Errorf("lock %q: the api ptd's store did not confirm the lock: %w (%q, %v)", key, sandbox.ErrUnavailable, line, err))
	}
	return sync.OnceFunc(func() {
		cancel()
		resp.Body.Close()
	}), nil
}

// ListenEvents calls notify for every commit the server learns of (see
// NewHandler), bursts coalesced, until ctx ends. It follows the server's
// commit stream and connects again after a failure, with a pause that
// grows to 30s; it calls notify at every (re)connection, since commits
// may have been missed meanwhile. A stream silent for three keepalives is
// taken as dead. If the server passes on no commits, it logs that once
// and returns: readers then rely on their polling.
func (c *Client) ListenEvents(ctx context.Context, notify func()) {
	pause := time.Second
	for ctx.Err() == nil {
		err := c.follow(ctx, notify)
		if ctx.Err() != nil {
			return
		}
		var re *remoteError
		if errors.As(err, &re) && re.code == codeNoCommits {
			c.log.Info("remote store: " + re.msg)
			return
		}
		if err == nil {
			pause = time.Second // it had connected
		}
		c.log.Warn("remote store: commit stream ended; following it again", "err", err, "in", pause)
		notify()
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

// follow reads one connection's commit stream; a nil error means it had
// connected and the stream then ended.
func (c *Client) follow(ctx context.Context, notify func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := c.post(ctx, eventsPath, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	watchdog := time.AfterFunc(3*keepalive, cancel)
	defer watchdog.Stop()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		watchdog.Reset(3 * keepalive)
		switch sc.Text() {
		case lineReady, lineCommit:
			notify()
		}
	}
	return nil
}

// keyQueue lets one caller at a time through per key; a wait ends with
// its ctx.
type keyQueue struct {
	mu sync.Mutex
	m  map[string]*keySlot
}

type keySlot struct {
	ch   chan struct{} // holds a value while a caller is through
	refs int           // callers through or waiting
}

func (q *keyQueue) enter(ctx context.Context, key string) (leave func(), err error) {
	q.mu.Lock()
	if q.m == nil {
		q.m = map[string]*keySlot{}
	}
	k := q.m[key]
	if k == nil {
		k = &keySlot{ch: make(chan struct{}, 1)}
		q.m[key] = k
	}
	k.refs++
	q.mu.Unlock()
	drop := func() {
		q.mu.Lock()
		if k.refs--; k.refs == 0 {
			delete(q.m, key)
		}
		q.mu.Unlock()
	}
	select {
	case k.ch <- struct{}{}:
		return func() { <-k.ch; drop() }, nil
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
}
