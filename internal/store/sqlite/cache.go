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
	sb, gen, hit = lookup(ctx, c, c.sandboxes, id)
	if hit {
		sb = sb.Clone() // the cached record is never changed in place, so this needs no lock
	}
	return sb, gen, hit
}

// putSandbox keeps a copy of sb, read from the database after a lookup
// that answered gen, unless the cache was emptied since.
func (c *readCache) putSandbox(gen uint64, sb sandbox.Sandbox) {
	keep(c, c.sandboxes, gen, sb.ID, sb.Clone())
}

// token is sandbox for tokens (a Token has no shared parts).
func (c *readCache) token(ctx context.Context, hash string) (t store.Token, gen uint64, hit bool) {
	return lookup(ctx, c, c.tokens, hash)
}

// putToken is putSandbox for tokens.
func (c *readCache) putToken(gen uint64, t store.Token) {
	keep(c, c.tokens, gen, t.Hash, t)
}

// lookup is the cache read of one of c's maps: the value under k (hit),
// or, on a miss, the generation a read from the database must give keep;
// when the cache cannot serve (the pragma failed) a generation keep
// refuses.
func lookup[V any](ctx context.Context, c *readCache, m map[string]V, k string) (v V, gen uint64, hit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.checkLocked(ctx) {
		return v, c.gen - 1, false
	}
	v, hit = m[k]
	return v, c.gen, hit
}

// keep stores v under k in one of c's maps unless the cache was emptied
// since the lookup that answered gen (the read may predate a commit). A
// full map starts over.
func keep[V any](c *readCache, m map[string]V, gen uint64, k string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(m) >= maxCached {
		clear(m)
	}
	m[k] = v
}
