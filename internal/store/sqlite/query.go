package sqlite

import (
	"context"
	"database/sql"
)

// rowsQueryer is what queryAll needs from a pool or a transaction.
type rowsQueryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryAll runs query and scans every row with scan: the one loop every
// list shares, so none of them can forget rows.Err or the deferred Close.
// It returns an empty (not nil) slice when nothing matches, so lists
// encode as [] rather than null. Errors come back unwrapped; callers add
// their prefix.
func queryAll[T any](ctx context.Context, q rowsQueryer, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
