package agentclient

import (
	"context"
	"errors"
	"net"
	"sync"
)

// conns are the connections a client with a pool of its own (NewOwnPool)
// has open, so that Abort can end the calls in flight on them: an agent
// whose sandbox was killed outright (a gVisor sandbox ended by its host)
// sends no FIN or RST, and a stream waiting on it would hang until TCP
// keepalive gave up, some 30 s.
type conns struct {
	mu    sync.Mutex
	open  map[*abortable]struct{}
	cause error // set once by abort
}

func (s *conns) aborted() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause
}

// wrap returns a dial function that records every connection dial makes.
func (s *conns) wrap(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := s.aborted(); err != nil {
			return nil, &abortError{err}
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		a := &abortable{Conn: c, set: s}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cause != nil {
			c.Close()
			return nil, &abortError{s.cause}
		}
		s.open[a] = struct{}{}
		return a, nil
	}
}

// abort closes every open connection; their reads and writes, and every
// later dial, fail with cause.
func (s *conns) abort(cause error) {
	s.mu.Lock()
	if s.cause == nil {
		s.cause = cause
	}
	open := s.open
	s.open = map[*abortable]struct{}{}
	s.mu.Unlock()
	for a := range open {
		a.Conn.Close()
	}
}

// abortable is a recorded connection: after abort its errors are the
// cause, so a caller learns why its call ended rather than that a
// connection was closed.
type abortable struct {
	net.Conn
	set *conns
}

func (a *abortable) Read(b []byte) (int, error) {
	n, err := a.Conn.Read(b)
	return n, a.why(err)
}

func (a *abortable) Write(b []byte) (int, error) {
	n, err := a.Conn.Write(b)
	return n, a.why(err)
}

func (a *abortable) Close() error {
	a.set.mu.Lock()
	delete(a.set.open, a)
	a.set.mu.Unlock()
	return a.Conn.Close()
}

func (a *abortable) why(err error) error {
	if err != nil {
		if cause := a.set.aborted(); cause != nil {
			return &abortError{cause}
		}
	}
	return err
}

// abortError is an aborted connection's error. The layers above wrap it in
// their own words (connect-go: "protocol error: incomplete envelope"),
// which say nothing to the caller: the client's error mapping finds it
// and answers the cause alone (abortCause).
type abortError struct{ cause error }

func (e *abortError) Error() string { return e.cause.Error() }
func (e *abortError) Unwrap() error { return e.cause }

// abortCause returns the cause of an aborted call, or nil.
func abortCause(err error) error {
	var ae *abortError
	if errors.As(err, &ae) {
		return ae.cause
	}
	return nil
}

// Abort ends the client's calls in flight and fails its later ones, all
// with an error wrapping cause: the sandbox is gone and will not answer.
// Only a client made by NewOwnPool can; on another it only closes the
// idle connections.
func (c *Client) Abort(cause error) {
	if c.conns != nil {
		c.conns.abort(cause)
	}
	c.hc.CloseIdleConnections()
}
