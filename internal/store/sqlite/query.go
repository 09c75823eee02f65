package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/platinum-dev/platinum/internal/store"
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

// getOne scans the one row a read by ID returns, with the errors every Get
// shares: no row is store.ErrNotFound named by kind and id, any other
// failure is prefixed "get <kind> <id>".
func getOne[T any](row scanner, scan func(scanner) (T, error), kind, id string) (T, error) {
	v, err := scan(row)
	if errors.Is(err, sql.ErrNoRows) {
		var zero T
		return zero, fmt.Errorf("%s %q: %w", kind, id, store.ErrNotFound)
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("get %s %q: %w", kind, id, err)
	}
	return v, nil
}
