package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"
	"time"

	"github.com/platinum-dev/platinum/internal/metrics"

	msqlite "modernc.org/sqlite"
)

// openMetered opens a pool on dsn whose statements, transaction begins
// and commits are timed into the store latency metric under pool's name
// ("read" or "write"). It wraps the driver's connections rather than the
// Store's methods, so every query is covered, including ones added later.
// writes, if set, is told of every statement and transaction on the pool
// (the writer's), for the read cache (cache.go).
func openMetered(dsn, pool string, writes *writeTracker) *sql.DB {
	return sql.OpenDB(&meteredConnector{dsn: dsn, pool: pool, writes: writes})
}

// meteredConnector opens modernc connections on one DSN.
type meteredConnector struct {
	dsn, pool string
	writes    *writeTracker
}

// writeTracker tells the read cache when this process writes: inFlight
// counts the writer's statements and transactions under way, and seq
// moves once each of them ends — after its commit, so a reader that sees
// neither a write under way nor a new seq has seen every commit this
// process finished. Any use of the writer counts, reads included: a
// write it cannot see is a stale read, an extra count only a cache miss.
type writeTracker struct {
	inFlight atomic.Int64
	seq      atomic.Uint64
}

func (w *writeTracker) begin() {
	if w != nil {
		w.inFlight.Add(1)
	}
}

// end is begin's pair: seq moves before inFlight drops, so no reader sees
// the write neither under way nor done.
func (w *writeTracker) end() {
	if w != nil {
		w.seq.Add(1)
		w.inFlight.Add(-1)
	}
}

// settled returns seq when no write is under way (ok), read in the order
// that makes a write that starts and ends between the two loads show.
func (w *writeTracker) settled() (seq uint64, ok bool) {
	if w.inFlight.Load() > 0 {
		return 0, false
	}
	return w.seq.Load(), true
}

var sqliteDriver = &msqlite.Driver{}

func (c *meteredConnector) Driver() driver.Driver { return sqliteDriver }

func (c *meteredConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := sqliteDriver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &meteredConn{conn: conn, pool: c.pool, writes: c.writes, stmts: map[string]*cachedStmt{}}, nil
}

// inner is what database/sql uses of modernc's connection: the context
// forms of every call, session reset and validity.
type inner interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// meteredConn times the calls that reach SQLite. A connection whose driver
// lacks a context form falls back as database/sql would (driver.ErrSkip).
type meteredConn struct {
	conn   driver.Conn
	pool   string
	writes *writeTracker
	// stmts caches this connection's prepared queries by their text:
	// SQLite parses and plans a statement on every prepare, and for the
	// hot point reads (a token, a sandbox) that was most of their cost.
	// database/sql uses a connection from one goroutine at a time.
	stmts map[string]*cachedStmt
}

// maxCachedStmts bounds a connection's cache; queries built from filters
// (lists) vary, the hot ones are few and come first.
const maxCachedStmts = 128

// cachedStmt is a prepared query and whether rows of it are open (then a
// second use on the same connection, inside one transaction, prepares
// afresh rather than reset the statement under them).
type cachedStmt struct {
	stmt   driver.StmtQueryContext
	closer driver.Stmt
	inUse  bool
}

func (c *meteredConn) observe(op string, t0 time.Time) {
	metrics.StoreQuery(c.pool, op, time.Since(t0))
}

func (c *meteredConn) Prepare(q string) (driver.Stmt, error) { return c.conn.Prepare(q) }

func (c *meteredConn) Close() error {
	for _, cs := range c.stmts {
		cs.closer.Close()
	}
	c.stmts = nil
	return c.conn.Close()
}
func (c *meteredConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *meteredConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	in, ok := c.conn.(inner)
	if !ok {
		return nil, driver.ErrSkip
	}
	c.writes.begin()
	t0 := time.Now()
	tx, err := in.BeginTx(ctx, opts)
	c.observe("begin", t0)
	if err != nil {
		c.writes.end()
		return nil, err
	}
	return &meteredTx{Tx: tx, c: c}, nil
}

func (c *meteredConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	if in, ok := c.conn.(inner); ok {
		return in.PrepareContext(ctx, q)
	}
	return c.conn.Prepare(q)
}

func (c *meteredConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	in, ok := c.conn.(inner)
	if !ok {
		return nil, driver.ErrSkip
	}
	c.writes.begin()
	defer c.writes.end()
	t0 := time.Now()
	defer c.observe("exec", t0)
	return in.ExecContext(ctx, q, args)
}

func (c *meteredConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	in, ok := c.conn.(inner)
	if !ok {
		return nil, driver.ErrSkip
	}
	t0 := time.Now()
	defer c.observe("query", t0)
	c.writes.begin() // a query on the writer may write (RETURNING); it ends when its rows close
	var rows driver.Rows
	var err error
	cs := c.cached(ctx, in, q)
	if cs != nil {
		rows, err = cs.stmt.QueryContext(ctx, args)
	} else {
		rows, err = in.QueryContext(ctx, q, args)
	}
	if err != nil {
		c.writes.end()
		return nil, err
	}
	if cs != nil {
		cs.inUse = true
	}
	return &meteredRows{Rows: rows, cs: cs, writes: c.writes}, nil
}

// cached returns q's prepared statement on this connection, preparing it
// on first use, or nil when it is in use, the cache is full or the
// prepare failed (the caller then runs q unprepared, which reports the
// error itself).
func (c *meteredConn) cached(ctx context.Context, in inner, q string) *cachedStmt {
	if cs, ok := c.stmts[q]; ok {
		if cs.inUse {
			return nil
		}
		return cs
	}
	if c.stmts == nil || len(c.stmts) >= maxCachedStmts {
		return nil
	}
	st, err := in.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	sqc, ok := st.(driver.StmtQueryContext)
	if !ok {
		st.Close()
		return nil
	}
	cs := &cachedStmt{stmt: sqc, closer: st}
	c.stmts[q] = cs
	return cs
}

// meteredRows frees its cached statement (cs, if any) for the next use
// when closed, and ends its write.
type meteredRows struct {
	driver.Rows
	cs     *cachedStmt
	writes *writeTracker
}

func (r *meteredRows) Close() error {
	if r.cs != nil {
		r.cs.inUse = false
	}
	err := r.Rows.Close()
	r.writes.end()
	return err
}

func (c *meteredConn) Ping(ctx context.Context) error {
	if in, ok := c.conn.(inner); ok {
		return in.Ping(ctx)
	}
	return nil
}

func (c *meteredConn) ResetSession(ctx context.Context) error {
	if in, ok := c.conn.(inner); ok {
		return in.ResetSession(ctx)
	}
	return nil
}

func (c *meteredConn) IsValid() bool {
	if in, ok := c.conn.(inner); ok {
		return in.IsValid()
	}
	return true
}

type meteredTx struct {
	driver.Tx
	c *meteredConn
}

func (t *meteredTx) Commit() error {
	defer t.c.writes.end()
	t0 := time.Now()
	defer t.c.observe("commit", t0)
	return t.Tx.Commit()
}

func (t *meteredTx) Rollback() error {
	defer t.c.writes.end()
	return t.Tx.Rollback()
}
