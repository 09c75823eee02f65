package sqlite

import (
	"context"
	"database/sql"

	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
)

// rowsQueryer is what queryAll needs from a pool or a transaction.
type rowsQueryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryAll runs query and scans every row with scan (rowscan.All), closing
// the rows after. Errors come back unwrapped; callers add their prefix.
func queryAll[T any](ctx context.Context, q rowsQueryer, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return rowscan.All(rows, scan)
}

// getOne scans the one row a read by ID returns (rowscan.One).
func getOne[T any](row scanner, scan func(scanner) (T, error), kind, id string) (T, error) {
	return rowscan.One(row, scan, sql.ErrNoRows, kind, id)
}
