package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// readCache keeps the API's hot point reads — a sandbox by ID, a token by
// hash — in memory while the database does not change. Every request reads
// its token and most read one sandbox; SQLite answering them was most of
// the cost of GET /v1/sandboxes/{id} (docs/ARCHITECTURE.md, "Idle and busy
// sandboxes").
//
// This process's own writes are known exactly: the writer pool tells the
// cache of every statement and transaction (writeTracker), so while one is
// under way nothing is served from or kept in the cache, and once one ends
// the cache is emptied before the next hit. A read after a write returns
// has always seen it.
//
// Another process sharing the file (ptd never does; an operator's sqlite3
// shell might) is caught by SQLite's own answer: PRAGMA data_version, on a
// connection of the cache's own, changes whenever any other connection has
// committed, and a change empties the cache. It is asked at most every
// otherProcessesEvery, not before every hit: the ask takes a lock in
// SQLite's shared memory, and serialised lookups behind it cost more than
// half of a cached GET's time. A record read while a commit landed never
// enters the cache (gen). If the pragma fails the cache is emptied and
// bypassed.
type readCache struct {
	mu sync.Mutex
	// watch is one connection held for the Store's life: data_version is
	// only comparable between asks on the same connection.
	watch *sql.Conn
	// dv is the last data_version watch answered; valid says dv is set;
	// asked says when.
	dv    int64
	valid bool
	asked time.Time
	// writes is the writer pool's tracker; seq the count it had when the
	// cache last emptied for it.
	writes *writeTracker
	seq    uint64
	// gen counts emptyings; a database read made at an older gen is not
	// kept.
	gen       uint64
	sandboxes map[string]sandbox.Sandbox
	tokens    map[string]store.Token
}

// maxCached bounds each map; past it the map starts over.
const maxCached = 16384

// otherProcessesEvery is how often the cache asks whether another process
// committed: the longest such a commit can go unseen.
const otherProcessesEvery = 5 * time.Millisecond

func newReadCache(watch *sql.Conn, writes *writeTracker) *readCache {
	return &readCache{watch: watch, writes: writes, sandboxes: map[string]sandbox.Sandbox{}, tokens: map[string]store.Token{}}
}

// checkLocked empties the cache if the database changed since it was last
// filled, and reports whether the cache may serve reads now. c.mu is held.
func (c *readCache) checkLocked(ctx context.Context) bool {
	seq, ok := c.writes.settled()
	if !ok {
		return false // this process is writing: the database, not the cache
	}
	if seq != c.seq {
		c.emptyLocked()
		c.seq = seq
	}
	if c.valid && time.Since(c.asked) < otherProcessesEvery {
		return true
	}
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
	c.asked = time.Now()
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
// since the lookup that answered gen, or this process wrote since (the
// read may predate a commit). A full map starts over.
func keep[V any](c *readCache, m map[string]V, gen uint64, k string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq, ok := c.writes.settled(); gen != c.gen || !ok || seq != c.seq {
		return
	}
	if len(m) >= maxCached {
		clear(m)
	}
	m[k] = v
}
