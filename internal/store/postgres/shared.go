package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
	"github.com/platinum-dev/platinum/internal/store/internal/sqlstore"
)

// newShared is the parts of the Store written once for both SQL stores
// (internal/sqlstore), on its pool.
func newShared(pool *pgxpool.Pool) *sqlstore.Store {
	return sqlstore.New(pgDB{pool}, sqlstore.Dialect{
		EmptyBytes: `''::bytea`,
		FinishedAt: func(t *time.Time) any { return optTS(t) },
	})
}

// pgDB is the pool as shared code (sqldb.DB) sees it; it rebinds the
// shared queries' ? placeholders.
type pgDB struct{ pool *pgxpool.Pool }

func (d pgDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := d.pool.Exec(ctx, sqldb.Rebind(query), args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (d pgDB) WriteRow(ctx context.Context, query string, args ...any) rowscan.Row {
	return d.pool.QueryRow(ctx, sqldb.Rebind(query), args...)
}

func (d pgDB) QueryRow(ctx context.Context, query string, args ...any) rowscan.Row {
	return d.pool.QueryRow(ctx, sqldb.Rebind(query), args...)
}

func (d pgDB) Query(ctx context.Context, query string, args []any, fn func(rowscan.Rows) error) error {
	rows, err := d.pool.Query(ctx, sqldb.Rebind(query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return fn(rows)
}

func (pgDB) Err(what string, err error) error { return wrap(what, err) }
func (pgDB) AnyOf(col string, vals []string) (string, []any) {
	return col + ` = ANY(?)`, []any{vals}
}

func (pgDB) Limit(limit int) any      { return limitArg(limit) }
func (pgDB) NoRows() error            { return pgx.ErrNoRows }
func (pgDB) Time(t time.Time) any     { return t.UTC().Truncate(time.Microsecond) }
func (pgDB) Decoder() rowscan.Decoder { return dec }
