// Package syncs holds the few concurrency shapes the control plane and the
// host repeat: a mutex per key, a wake-up broadcast per key, a cancellable
// background task per key, a bounded wait
// that wakes on a broadcast and re-checks on a backstop poll, and a
// background loop that runs on a ticker or a wake-up, and a group of
// background goroutines a service closes and waits for. One tested copy of
// each, so a fix to a race lands everywhere at once.
package syncs

import (
	"context"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/requestid"
)

// KeyedMutex serialises operations on one key (a sandbox ID, an org's quota)
// without serialising different keys. Its zero value is ready to use. An
// entry lives only while someone holds or waits for its key.
type KeyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

// Lock locks key and returns the function that unlocks it.
func (k *KeyedMutex) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// Cancels runs at most one background task per key (a sandbox's OOM
// watch or guard poll) and stops it by key. Its zero value is ready to
// use.
type Cancels struct {
	mu sync.Mutex
	m  map[string]*context.CancelFunc
}

// Start returns the context of a new task for key, derived from parent,
// and the function the task calls when it ends on its own (it forgets key,
// unless a later task holds it already, and cancels the context). ok is
// false, and nothing starts, when key has a task already.
func (c *Cancels) Start(parent context.Context, key string) (ctx context.Context, ended func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, running := c.m[key]; running {
		return nil, nil, false
	}
	if c.m == nil {
		c.m = map[string]*context.CancelFunc{}
	}
	ctx, cancel := context.WithCancel(parent)
	task := &cancel
	c.m[key] = task
	return ctx, func() {
		c.mu.Lock()
		if c.m[key] == task {
			delete(c.m, key)
		}
		c.mu.Unlock()
		cancel()
	}, true
}

// Stop cancels key's task, if any, and forgets it.
func (c *Cancels) Stop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cancel, ok := c.m[key]; ok {
		(*cancel)()
		delete(c.m, key)
	}
}

// Notifier wakes the waiters of a key when what they wait on has changed. A
// waiter takes the key's channel before it reads the state, so a change
// committed between the read and the sleep still wakes it. Its zero value is
// ready to use.
type Notifier struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

// Channel returns a channel closed by the next Broadcast of key.
func (n *Notifier) Channel(key string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = map[string]chan struct{}{}
	}
	c, ok := n.ch[key]
	if !ok {
		c = make(chan struct{})
		n.ch[key] = c
	}
	return c
}

// Broadcast wakes every waiter on key.
func (n *Notifier) Broadcast(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c, ok := n.ch[key]; ok {
		close(c)
		delete(n.ch, key)
	}
}

// Wait calls check until it reports done, for at most timeout. Between calls
// it sleeps until the channel wake returned just before the call is closed,
// poll has passed (a backstop for writers this process does not see) or ctx
// ends. It reports whether check finished (false when timeout ran out) and
// the error of check or of ctx, which end the wait too.
func Wait(ctx context.Context, timeout, poll time.Duration, wake func() <-chan struct{}, check func() (done bool, err error)) (bool, error) {
	deadline := time.NewTimer(timeout) // timers use the monotonic clock
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		changed := wake() // before the read: a commit after it still wakes us
		done, err := check()
		if done || err != nil {
			return done, err
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// Loop runs fn at once and then again each time interval passes or the
// channel wake returned before the previous run is closed, until ctx ends. A
// run finishes before the next begins, so runs never pile up behind a slow
// one, and ticks or wake-ups that come meanwhile collapse into one run. A nil
// wake means the ticker alone.
func Loop(ctx context.Context, interval time.Duration, wake func() <-chan struct{}, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var changed <-chan struct{}
		if wake != nil {
			changed = wake()
		}
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
	}
}

// Every runs fn each time interval passes, starting one interval from now,
// until ctx ends. Like Loop, a run finishes before the next begins and a
// tick missed meanwhile is dropped rather than queued.
func Every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

// Group owns goroutines that outlive the requests that start them: each
// runs under the group's context, which Close cancels before it waits for
// them all, so a service that holds one ends and waits for every
// background job it started when it closes.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewGroup returns a Group whose context lives until Close.
func NewGroup() *Group {
	ctx, cancel := context.WithCancel(context.Background())
	return &Group{ctx: ctx, cancel: cancel}
}

// Context is the group's context: cancelled by Close.
func (g *Group) Context() context.Context { return g.ctx }

// Go runs fn on a goroutine of the group, for work no request started.
func (g *Group) Go(fn func(ctx context.Context)) { g.GoFor(context.Background(), fn) }

// GoFor runs fn on a goroutine of the group for work a request started:
// fn's context (the group's, so it outlives the request) carries the
// request's id, so what the work logs names the request that caused it.
func (g *Group) GoFor(origin context.Context, fn func(ctx context.Context)) {
	ctx := requestid.Carry(g.ctx, origin)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		fn(ctx)
	}()
}

// Loop runs Loop (or Every when first is false) on a goroutine of the
// group; it ends with ctx or when the group closes, whichever comes first,
// and fn's ctx ends with it; after (when not nil) runs once it has ended.
func (g *Group) Loop(ctx context.Context, interval time.Duration, first bool, wake func() <-chan struct{}, fn func(context.Context), after func()) {
	g.Go(func(gctx context.Context) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(gctx, cancel) // the group closing ends a run too
		defer stop()
		if first {
			Loop(ctx, interval, wake, fn)
		} else {
			Every(ctx, interval, fn)
		}
		if after != nil {
			after()
		}
	})
}

// Close cancels the group's context and waits for its goroutines.
func (g *Group) Close() {
	g.cancel()
	g.wg.Wait()
}

// InFlight counts the operations running per key (commands in a sandbox,
// claims of a pool still being handed over). The zero value is ready to
// use.
type InFlight[K comparable] struct {
	mu sync.Mutex
	n  map[K]int
}

// Start counts one operation of k and returns its end, which is safe to
// call more than once.
func (f *InFlight[K]) Start(k K) (done func()) {
	f.mu.Lock()
	if f.n == nil {
		f.n = map[K]int{}
	}
	f.n[k]++
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			if f.n[k]--; f.n[k] <= 0 {
				delete(f.n, k)
			}
			f.mu.Unlock()
		})
	}
}

// Count is how many operations of k are running.
func (f *InFlight[K]) Count(k K) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[k]
}
