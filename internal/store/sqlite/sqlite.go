// Package sqlite is the embedded metadata store: one SQLite file in WAL mode,
// driven by the pure-Go modernc.org/sqlite driver so ptd stays a static,
// cgo-free binary. It implements store.Store and passes storetest.
//
// Writes go through a single connection that begins every transaction with
// BEGIN IMMEDIATE, so writers in this process queue in database/sql (honouring
// ctx) instead of spinning on SQLITE_BUSY, and a read-then-write transaction
// can never deadlock on lock upgrade. Reads use a separate pool of read-only
// connections; in WAL mode they never block the writer and each read
// transaction sees one consistent snapshot. busy_timeout covers the remaining
// case of another process (or another Store) writing the same file.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
	"github.com/platinum-dev/platinum/internal/store/internal/sqlstore"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// busyTimeoutMS is how long a connection waits for another process's lock
// before SQLITE_BUSY. Generous: a busy error surfaces to users as a 5xx.
const busyTimeoutMS = 10000

// Store is a store.Store backed by one SQLite file. Create it with Open.
type Store struct {
	// Store is the parts written once for both SQL stores (shared.go).
	*sqlstore.Store

	w      *sql.DB // exactly one connection; BEGIN IMMEDIATE
	r      *sql.DB // read-only connections
	logger *slog.Logger
	// cache holds the hot point reads while the file does not change
	// (cache.go); watch, one connection of watchDB, tells it when it does.
	cache   *readCache
	watchDB *sql.DB
	watch   *sql.Conn

	closeOnce sync.Once
	closeErr  error

	// keys are LockKey's locks (cluster.go).
	keys keyLocks
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the SQLite database at path, switches it to
// WAL mode and applies any migrations it has not seen yet. path must be a
// file path: ":memory:" is refused because the read and write pools would
// each get their own empty database. A nil logger discards logs.
func Open(ctx context.Context, path string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") || strings.Contains(path, "?") {
		return nil, fmt.Errorf("sqlite: open %q: want a plain file path: %w", path, sandbox.ErrInvalidArgument)
	}

	writes := &writeTracker{}
	w := openMetered(dsn(path, true), "write", writes)
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: journal mode is %q, want wal (does the filesystem support shared memory?)", path, mode)
	}

	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
	}
	if err := migrate(ctx, w, sub, logger); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: migrate %s: %w", path, err)
	}

	r := openMetered(dsn(path, false), "read", nil)
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}

	// The read cache's own connection (cache.go), outside the read pool so
	// it is the same connection for the Store's life.
	wdb := openMetered(dsn(path, false), "read", nil)
	watch, err := wdb.Conn(ctx)
	if err != nil {
		wdb.Close()
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}

	return &Store{
		Store: newShared(w, r),
		w:     w, r: r, watchDB: wdb, watch: watch, logger: logger, cache: newReadCache(watch, writes),
	}, nil
}

// dsn builds the modernc DSN for path. busy_timeout comes first so the other
// pragmas (journal_mode needs a lock) already wait instead of failing.
func dsn(path string, write bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
	q.Add("_pragma", "foreign_keys(1)")
	if write {
		q.Add("_pragma", "journal_mode(WAL)")
		// In WAL mode NORMAL syncs at checkpoints, not at every commit: a
		// crash of ptd loses nothing committed (the WAL is in the page
		// cache); only a power loss can drop the last commits. That halves
		// the latency of every state transition.
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	return path + "?" + q.Encode()
}

// Close closes every connection. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.watch.Close(), s.watchDB.Close(), s.r.Close(), s.w.Close())
	})
	return s.closeErr
}

// write runs fn in a write (BEGIN IMMEDIATE) transaction and commits it if
// fn returns nil.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// read runs fn in a read-only transaction: every statement in it sees the
// same snapshot.
func (s *Store) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to lose
	return fn(tx)
}

// now is the store's clock, already at stored precision so values returned
// to callers equal what a later read gives back.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// formatTime renders t for storage; a zero t becomes def.
func formatTime(t, def time.Time) string {
	if t.IsZero() {
		t = def
	}
	return sandbox.FormatTime(t)
}

// parseTime reads a stored time back (always UTC).
func parseTime(v string) (time.Time, error) {
	t, err := time.Parse(sandbox.TimeFormat, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", v, err)
	}
	return t, nil
}

// scanner is the part of *sql.Row and *sql.Rows the scan helpers need.
type scanner = rowscan.Row

// dec decodes this store's rows: its time columns are TEXT in
// sandbox.TimeFormat.
var dec = rowscan.Decoder{Times: textTimes{}}

// textTimes scans TEXT time columns; a nullable one holds NULL (or, for
// template_builds.finished_at, ”) for no time.
type textTimes struct{}

func (textTimes) Dest() any                        { return new(string) }
func (textTimes) Time(dest any) (time.Time, error) { return parseTime(*dest.(*string)) }
func (textTimes) OptDest() any                     { return new(sql.NullString) }

func (textTimes) OptTime(dest any) (*time.Time, error) {
	v := dest.(*sql.NullString)
	if !v.Valid || v.String == "" {
		return nil, nil
	}
	t, err := parseTime(v.String)
	if err != nil {
		return nil, err
	}
	return &t, nil
}
