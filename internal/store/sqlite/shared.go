package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
	"github.com/platinum-dev/platinum/internal/store/internal/sqlstore"
)

// newShared is the parts of the Store written once for both SQL stores
// (internal/sqlstore), on its connections.
func newShared(w, r *sql.DB) *sqlstore.Store {
	return sqlstore.New(sqlDB{w: w, r: r}, sqlstore.Dialect{
		EmptyBytes: `x''`,
		// finished_at is NOT NULL: '' is "not finished".
		FinishedAt: func(t *time.Time) any {
			if t == nil {
				return ""
			}
			return sandbox.FormatTime(*t)
		},
	})
}

// sqlDB is the Store's connections as shared code (sqldb.DB) sees them:
// writes on the one write connection, reads on the read pool.
type sqlDB struct{ w, r *sql.DB }

func (d sqlDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := d.w.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (d sqlDB) WriteRow(ctx context.Context, query string, args ...any) rowscan.Row {
	return d.w.QueryRowContext(ctx, query, args...)
}

func (d sqlDB) QueryRow(ctx context.Context, query string, args ...any) rowscan.Row {
	return d.r.QueryRowContext(ctx, query, args...)
}

func (d sqlDB) Query(ctx context.Context, query string, args []any, fn func(rowscan.Rows) error) error {
	rows, err := d.r.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return fn(rows)
}

func (sqlDB) Err(what string, err error) error { return fmt.Errorf("%s: %w", what, err) }

func (sqlDB) AnyOf(col string, vals []string) (string, []any) {
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	return col + ` IN (?` + strings.Repeat(", ?", len(vals)-1) + `)`, args
}

// Limit: SQLite's LIMIT -1 is no limit.
func (sqlDB) Limit(limit int) any {
	if limit <= 0 {
		return -1
	}
	return limit
}

func (sqlDB) NoRows() error            { return sql.ErrNoRows }
func (sqlDB) Time(t time.Time) any     { return sandbox.FormatTime(t) }
func (sqlDB) Decoder() rowscan.Decoder { return dec }
