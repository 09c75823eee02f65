package upstream

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
)

// Conns is a set of connections that can be ended together (Abort): a
// sandbox killed outright (a gVisor sandbox its host ended for memory)
// sends no FIN or RST, and a call waiting on one of its connections would
// hang some 30 s, until TCP keepalive gave up. Once aborted, the set's
// reads, writes and dials fail with an error wrapping the cause.
type Conns struct {
	mu    sync.Mutex
	open  map[*tracked]struct{}
	cause error  // set once by Abort
	key   string // the sandbox, for a set of the process's registry
}

// DialFunc is the shape of net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dial returns dial recording every connection it makes in s.
func (s *Conns) Dial(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := s.aborted(); err != nil {
			return nil, err
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return s.add(c)
	}
}

func (s *Conns) aborted() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cause != nil {
		return &abortError{s.cause}
	}
	return nil
}

func (s *Conns) add(c net.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cause != nil {
		c.Close()
		return nil, &abortError{s.cause}
	}
	if s.open == nil {
		s.open = map[*tracked]struct{}{}
	}
	t := &tracked{Conn: c, set: s}
	s.open[t] = struct{}{}
	return t, nil
}

// Abort closes every open connection of s; their reads and writes, and
// every later dial, fail with an error wrapping cause.
func (s *Conns) Abort(cause error) {
	s.mu.Lock()
	if s.cause == nil {
		s.cause = cause
	}
	open := s.open
	s.open = nil
	s.mu.Unlock()
	for t := range open {
		t.Conn.Close()
	}
}

// tracked is a recorded connection: after Abort its errors are the cause,
// so a caller learns why its call ended rather than that a connection was
// closed.
type tracked struct {
	net.Conn
	set *Conns
}

func (t *tracked) Read(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	return n, t.why(err)
}

func (t *tracked) Write(b []byte) (int, error) {
	n, err := t.Conn.Write(b)
	return n, t.why(err)
}

func (t *tracked) Close() error {
	s := t.set
	s.mu.Lock()
	delete(s.open, t)
	empty := len(s.open) == 0
	s.mu.Unlock()
	if empty && s.key != "" {
		registry.forget(s)
	}
	return t.Conn.Close()
}

func (t *tracked) why(err error) error {
	if err == nil {
		return nil
	}
	if aerr := t.set.aborted(); aerr != nil {
		return aerr
	}
	return err
}

// abortError is an aborted connection's error. The layers above wrap it in
// their own words (connect-go: "protocol error: incomplete envelope"),
// which say nothing to the caller: AbortCause finds it under them.
type abortError struct{ cause error }

func (e *abortError) Error() string { return e.cause.Error() }
func (e *abortError) Unwrap() error { return e.cause }

// AbortCause returns the cause of a call that Abort ended, or nil.
func AbortCause(err error) error {
	var ae *abortError
	if errors.As(err, &ae) {
		return ae.cause
	}
	return nil
}

// registry holds, by sandbox, every connection Dial made, so that Abort
// ends the calls in flight to one sandbox across every proxy of the
// process. A sandbox's set leaves it when its last connection closes, and
// at Abort, so the sandbox's next boot is dialled afresh. Locks: the
// registry's before a set's.
var registry = &sandboxConns{by: map[string]*Conns{}}

type sandboxConns struct {
	sync.Mutex
	by map[string]*Conns
}

// track records c as a connection to the sandbox key names.
func track(key string, c net.Conn) (net.Conn, error) {
	if key == "" {
		return c, nil
	}
	registry.Lock()
	defer registry.Unlock()
	s := registry.by[key]
	if s == nil {
		s = &Conns{key: key}
		registry.by[key] = s
	}
	return s.add(c)
}

// forget drops s from the registry if it is still there and empty.
func (r *sandboxConns) forget(s *Conns) {
	r.Lock()
	defer r.Unlock()
	if r.by[s.key] != s {
		return
	}
	s.mu.Lock()
	empty := len(s.open) == 0
	s.mu.Unlock()
	if empty {
		delete(r.by, s.key)
	}
}

// errEnded is what the proxies' calls into an aborted sandbox fail with.
var errEnded = errors.New("the sandbox was ended")

// Abort closes every connection the process's proxies hold to the sandbox
// id, whatever its boot: their calls in flight end at once.
func Abort(id string) {
	key := sandboxKey(id)
	registry.Lock()
	s := registry.by[key]
	delete(registry.by, key)
	registry.Unlock()
	if s != nil {
		s.Abort(errEnded)
	}
}

// sandboxKey is the part of a pool name (Host) that names the sandbox:
// its ID as the name writes it, without the boot.
func sandboxKey(id string) string { return strings.ToLower(strings.ReplaceAll(id, "_", "-")) }

// keyOf returns the sandbox part of a pool name's host, or "".
func keyOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !strings.HasSuffix(host, suffix) {
		return ""
	}
	_, rest, ok := strings.Cut(strings.TrimSuffix(host, suffix), ".")
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(rest, '-') // before the boot
	if i <= 0 {
		return ""
	}
	return rest[:i]
}
