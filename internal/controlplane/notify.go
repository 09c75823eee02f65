package controlplane

import "sync"

// notifier wakes waiters when a sandbox's record changes. A waiter takes
// the channel before it reads the state, so a change committed between the
// read and the sleep still wakes it.
type notifier struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: map[string]chan struct{}{}} }

// channel returns a channel closed by the next broadcast for id.
func (n *notifier) channel(id string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.ch[id]
	if !ok {
		c = make(chan struct{})
		n.ch[id] = c
	}
	return c
}

// broadcast wakes every waiter on id.
func (n *notifier) broadcast(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c, ok := n.ch[id]; ok {
		close(c)
		delete(n.ch, id)
	}
}

// keyedMutex serialises operations on one sandbox (provision, teardown)
// without serialising different sandboxes.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*refMutex
}

type refMutex struct {
	sync.Mutex
	refs int
}

// lock locks key and returns its unlock function.
func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*refMutex{}
	}
	m, ok := k.locks[key]
	if !ok {
		m = &refMutex{}
		k.locks[key] = m
	}
	m.refs++
	k.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		k.mu.Lock()
		m.refs--
		if m.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
