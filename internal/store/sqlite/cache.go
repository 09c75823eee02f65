package sqlite

import (
	"context"
	"database/sql"
	"sync"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// readCache keeps the API's hot point reads — a sandbox by ID, a token by
// hash — in memory while the database does not change. Every request reads
// its token and most read one sandbox; SQLite answering them was most of
// the cost of GET /v1/sandboxes/{id} (docs/ARCHITECTURE.md, "Idle and busy
// sandboxes").
//
// Whether the database changed is SQLite's own answer, not ours: before
// every lookup the cache asks PRAGMA data_version on a connection of its
// own, which changes whenever any other connection — this Store's writer,
// or another process sharing the file — has committed since the last ask.
// A change empties the cache. So a hit is only served when nothing was committed since the
// record was read, and a record read while a commit landed never enters
// the cache (gen). If the pragma fails the cache is emptied and bypassed.
type readCache struct {
	mu sync.Mutex
	// watch is one connection held for the Store's life: data_version is
	// only comparable between asks on the same connection.
	watch *sql.Conn
	// dv is the last data_version watch answered; valid says dv is set.
	dv    int64
	valid bool
	// gen counts emptyings; a database read made at an older gen is not
	// kept.
	gen       uint64
	sandboxes map[string]sandbox.Sandbox
	tokens    map[string]store.Token
}

// maxCached bounds each map; past it the map starts over.
const maxCached = 16384

func newReadCache(watch *sql.Conn) *readCache {
	return &readCache{watch: watch, sandboxes: map[string]sandbox.Sandbox{}, tokens: map[string]store.Token{}}
}

// checkLocked empties the cache if the database changed since the last
// ask, and reports whether the cache may serve reads. c.mu is held.
func (c *readCache) checkLocked(ctx context.Context) bool {
	var dv int64
	if err := c.watch.QueryRowContext(ctx, "PRAGMA data_version").Scan(&dv); err != nil {
		c.emptyLocked()
		c.valid = false
		return false
	}
	if !c.valid || dv != c.dv {
		c.emptyLocked()
		c.dv, c.valid = dv, true
	}
	return true
}

func (c *readCache) emptyLocked() {
	c.gen++
	clear(c.sandboxes)
	clear(c.tokens)
}

// sandbox returns a copy of the cached record of id (hit), or the
// generation a read from the database must give putSandbox.
func (c *readCache) sandbox(ctx context.Context, id string) (sb sandbox.Sandbox, gen uint64, hit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.checkLocked(ctx) {
		return sandbox.Sandbox{}, c.gen - 1, false // a gen putSandbox refuses
	}
	cached, ok := c.sandboxes[id]
	if !ok {
		return sandbox.Sandbox{}, c.gen, false
	}
	return cached.Clone(), c.gen, true
}

// putSandbox keeps a copy of sb, read from the database after a lookup
// that answered gen, unless the cache was emptied since.
func (c *readCache) putSandbox(gen uint64, sb sandbox.Sandbox) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.sandboxes) >= maxCached {
		clear(c.sandboxes)
	}
	c.sandboxes[sb.ID] = sb.Clone()
}

// token is sandbox for tokens (a Token has no shared parts).
func (c *readCache) token(ctx context.Context, hash string) (t store.Token, gen uint64, hit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.checkLocked(ctx) {
		return store.Token{}, c.gen - 1, false
	}
	t, ok := c.tokens[hash]
	return t, c.gen, ok
}

// putToken is putSandbox for tokens.
func (c *readCache) putToken(gen uint64, t store.Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.tokens) >= maxCached {
		clear(c.tokens)
	}
	c.tokens[t.Hash] = t
}
