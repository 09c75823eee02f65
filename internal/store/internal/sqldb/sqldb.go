// Package sqldb is the little that store code written once needs from a
// SQL store's connections, so the same Go (and, where the dialects agree,
// the same SQL) runs on SQLite and on PostgreSQL. Queries are written with
// ? placeholders; the PostgreSQL DB rebinds them to $1, $2, … (Rebind).
// What the dialects spell differently stays with each store.
package sqldb

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
)

// DB is one store's connections as shared code sees them.
type DB interface {
	// Exec runs a write and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// WriteRow runs a write that returns at most one row (RETURNING).
	WriteRow(ctx context.Context, query string, args ...any) rowscan.Row
	// QueryRow runs a read of at most one row.
	QueryRow(ctx context.Context, query string, args ...any) rowscan.Row
	// Query runs a read and hands fn its rows, closing them after.
	Query(ctx context.Context, query string, args []any, fn func(rowscan.Rows) error) error
	// NoRows is the error a QueryRow's Scan returns when nothing matched.
	NoRows() error
	// Err prefixes a failed write's error with what; a store whose
	// driver refuses some caller input (PostgreSQL: NUL in text) makes
	// that sandbox.ErrInvalidArgument.
	Err(what string, err error) error
	// Time is t in the form the store keeps times in.
	Time(t time.Time) any
	// AnyOf is the condition "col is one of vals" and its arguments
	// (SQLite: col IN (?, …); PostgreSQL: col = ANY(?)). vals is not empty.
	AnyOf(col string, vals []string) (string, []any)
	// Limit is a LIMIT parameter for limit, where limit <= 0 means none.
	Limit(limit int) any
	// Decoder decodes the store's rows.
	Decoder() rowscan.Decoder
}

// Now is the stores' clock, already at stored precision so values returned
// to callers equal what a later read gives back.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Or is t, or def when t is zero: the time a write stores for a field the
// caller left unset.
func Or(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

// Stored is t as the stores keep it (UTC, to the microsecond); a zero t
// means now.
func Stored(t time.Time) time.Time {
	if t.IsZero() {
		return Now()
	}
	return t.UTC().Truncate(time.Microsecond)
}

// Strings is vs as plain strings, for AnyOf.
func Strings[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// Found is nil if a write changed n > 0 rows, else store.ErrNotFound
// naming what it looked for.
func Found(n int64, what string) error {
	if n == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return nil
}

// Write runs query, a write whose row count does not matter: a failure is
// "<what>: <err>" ("put snapshot \"snap_1\": ...").
func Write(ctx context.Context, db DB, what, query string, args ...any) error {
	if _, err := db.Exec(ctx, query, args...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// DeleteOne runs query, a DELETE of the one record what names ("webhook
// \"wh_1\""): a failure is "delete <what>: <err>", nothing deleted is
// store.ErrNotFound (Found).
func DeleteOne(ctx context.Context, db DB, what, query string, args ...any) error {
	n, err := db.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("delete %s: %w", what, err)
	}
	return Found(n, what)
}

// Inserted is nil if an INSERT … ON CONFLICT DO NOTHING inserted its row
// (n > 0), else store.ErrConflict naming the kind and id that exist.
func Inserted(n int64, kind, id string) error {
	if n == 0 {
		return fmt.Errorf("%s %q: already exists: %w", kind, id, store.ErrConflict)
	}
	return nil
}

// All runs query and scans every row with scan (rowscan.All).
func All[T any](ctx context.Context, db DB, scan func(rowscan.Row) (T, error), query string, args ...any) ([]T, error) {
	var out []T
	err := db.Query(ctx, query, args, func(rows rowscan.Rows) (err error) {
		out, err = rowscan.All(rows, scan)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// List is All with its failure prefixed by what ("list webhooks"), the
// whole of most list methods.
func List[T any](ctx context.Context, db DB, scan func(rowscan.Row) (T, error), what, query string, args ...any) ([]T, error) {
	out, err := All(ctx, db, scan, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// One runs a read by ID and scans its row (rowscan.One).
func One[T any](ctx context.Context, db DB, scan func(rowscan.Row) (T, error), kind, id, query string, args ...any) (T, error) {
	return rowscan.One(db.QueryRow(ctx, query, args...), scan, db.NoRows(), kind, id)
}

// Rebind turns a query's ? placeholders into PostgreSQL's $1, $2, …. The
// shared queries hold no ? inside a string literal.
func Rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
