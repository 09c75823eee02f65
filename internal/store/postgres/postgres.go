// Package postgres is the metadata store on PostgreSQL, for control planes
// of more than one process (docs/ARCHITECTURE.md, "Store"). It implements
// store.Store with pgx and passes storetest, like the embedded sqlite
// store, and does on purpose what SQLite's single writer gave for free:
//
//   - read-modify-writes lock the row (SELECT … FOR UPDATE) and updates
//     are compare-and-swaps on version under that lock;
//   - a paged list reads its rows and its total in one REPEATABLE READ
//     snapshot;
//   - event IDs are taken under a transaction-scoped advisory lock held to
//     commit, so they become visible in ID order and a cursor never skips
//     a row committed after a higher one (events.go);
//   - claims (idempotency keys, warm-pool sandboxes) lock what they take,
//     so two callers never both win.
//
// Times are timestamptz (microseconds, returned in UTC), text is COLLATE
// "C" so lists order as on SQLite, and the schema migrates on Open under
// an advisory lock, so ptd processes starting together apply it once.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/platinum-dev/platinum/internal/metrics"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
	"github.com/platinum-dev/platinum/internal/store/internal/sqlstore"
)

// defaultMaxConns is the pool size unless the URL sets pool_max_conns:
// each API request holds a connection for one statement or transaction.
const defaultMaxConns = 16

// Store is a store.Store on a PostgreSQL database. Create it with Open.
type Store struct {
	// Store is the parts written once for both SQL stores (shared.go).
	*sqlstore.Store

	pool   *pgxpool.Pool
	logger *slog.Logger

	closeOnce sync.Once

	// afterListCount, when set (tests), runs between ListSandboxes' count
	// and its page query.
	afterListCount func()

	// keySlots bounds LockKey's holders to half the pool: each holds a
	// connection (its transaction) while its caller does the check and
	// write the lock guards, which need connections of their own.
	keySlots chan struct{}
}

var _ store.Store = (*Store)(nil)

// Open connects to the database named by url (postgres://user@host/db?…,
// or the key=value form; libpq's PG* environment variables fill in what it
// leaves out, e.g. PGPASSWORD) and applies the migrations the database
// has not seen. A nil logger discards logs.
func Open(ctx context.Context, url string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message can quote the URL, password and all: say less.
		return nil, fmt.Errorf("postgres: the store URL does not parse (want postgres://user@host:port/db?sslmode=…): %w", sandbox.ErrInvalidArgument)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "ptd"
	}
	cfg.ConnConfig.Tracer = meter{}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		// timestamptz comes back in UTC, as the store contract says.
		c.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		return nil
	}
	where := cfg.ConnConfig.Host + "/" + cfg.ConnConfig.Database
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres %s: %w", where, err)
	}
	if err := migrate(ctx, pool, logger); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres %s: migrate: %w", where, err)
	}
	return &Store{
		Store: newShared(pool),
		pool:  pool, logger: logger, keySlots: make(chan struct{}, max(1, cfg.MaxConns/2)),
	}, nil
}

// Close closes the pool. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}

// maxTxAttempts bounds retries of a transaction the server aborted as a
// deadlock or serialization failure (none is expected: every transaction
// takes its locks in one order; this is the safety net).
const maxTxAttempts = 3

// tx runs fn in a READ COMMITTED transaction and commits it if fn returns
// nil. A transaction the server aborted to break a deadlock is run again.
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.txOpts(ctx, pgx.TxOptions{}, fn)
}

// snapshot runs fn in a read-only REPEATABLE READ transaction: every
// statement in it reads the same snapshot.
func (s *Store) snapshot(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.txOpts(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func (s *Store) txOpts(ctx context.Context, opts pgx.TxOptions, fn func(tx pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginTxFunc(ctx, s.pool, opts, fn)
		if attempt < maxTxAttempts && retryable(err) {
			s.logger.Warn("store transaction retried", "err", err)
			continue
		}
		return err
	}
}

// PostgreSQL error codes the store acts on.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlock             = "40P01"
	codeBadCharacter         = "22021" // e.g. a NUL byte in text
	codeUntranslatable       = "22P05" // e.g. \u0000 in jsonb
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func retryable(err error) bool {
	c := pgCode(err)
	return c == codeSerializationFailure || c == codeDeadlock
}

// isUnique reports whether err is a unique-constraint violation.
func isUnique(err error) bool { return pgCode(err) == codeUniqueViolation }

// wrap adds what to err and turns PostgreSQL's refusals of input it cannot
// store (NUL bytes, which SQLite keeps) into ErrInvalidArgument, so the
// caller answers 400, not 500.
func wrap(what string, err error) error {
	switch pgCode(err) {
	case codeBadCharacter, codeUntranslatable:
		return fmt.Errorf("%s: text with a NUL character cannot be stored: %w", what, sandbox.ErrInvalidArgument)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// now is the store's clock at stored precision.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// ts is t as stored (UTC, microseconds); a zero t becomes def.
func ts(t, def time.Time) time.Time {
	if t.IsZero() {
		t = def
	}
	return t.UTC().Truncate(time.Microsecond)
}

// optTS is a nullable stored time.
func optTS(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC().Truncate(time.Microsecond)
	return &v
}

// queryAll runs query and scans every row with scan (rowscan.All), closing
// the rows after.
func queryAll[T any](ctx context.Context, q querier, scan func(rowscan.Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return rowscan.All(rows, scan)
}

// getOne scans a read by ID (rowscan.One).
func getOne[T any](row pgx.Row, scan func(rowscan.Row) (T, error), kind, id string) (T, error) {
	return rowscan.One(row, scan, pgx.ErrNoRows, kind, id)
}

// dec decodes this store's rows: its time columns are timestamptz, which
// the connections scan in UTC (Open).
var dec = rowscan.Decoder{Times: pgTimes{}}

// pgTimes scans timestamptz columns; a nullable one holds NULL for no time.
type pgTimes struct{}

func (pgTimes) Dest() any                            { return new(time.Time) }
func (pgTimes) Time(dest any) (time.Time, error)     { return dest.(*time.Time).UTC(), nil }
func (pgTimes) OptDest() any                         { return new(*time.Time) }
func (pgTimes) OptTime(dest any) (*time.Time, error) { return optTS(*dest.(**time.Time)), nil }

// querier is what reads need from the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// conflictUnlessInserted turns an INSERT … ON CONFLICT DO NOTHING that
// inserted nothing into ErrConflict.
func conflictUnlessInserted(tag pgconn.CommandTag, kind, id string) error {
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s %q: already exists: %w", kind, id, store.ErrConflict)
	}
	return nil
}

// meter times every statement into the store latency metric (pool
// "postgres"), by its first keyword: begin, commit, rollback, query
// (SELECT, WITH) or exec.
type meter struct{}

type meterKey struct{}

type meterStart struct {
	op string
	t0 time.Time
}

func (meter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, meterKey{}, meterStart{op: opOf(d.SQL), t0: time.Now()})
}

func (meter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if st, ok := ctx.Value(meterKey{}).(meterStart); ok {
		metrics.StoreQuery("postgres", st.op, time.Since(st.t0))
	}
}

func opOf(sql string) string {
	word, _, _ := strings.Cut(strings.TrimSpace(sql), " ")
	switch w := strings.ToLower(word); w {
	case "begin", "commit", "rollback":
		return w
	case "select", "with":
		return "query"
	}
	return "exec"
}
