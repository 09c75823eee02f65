// Package rowscan decodes the rows the SQL stores read back into store
// records. SQLite and PostgreSQL keep the same tables with the same
// columns in the same order; they differ only in how a time column comes
// back (text in SQLite, timestamptz in PostgreSQL). Each store hands a
// Decoder its Times, so the column lists and the checks on what a row
// holds are written once and a column added to a table is read alike by
// both.
package rowscan

import (
	"errors"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/store"
)

// Row is the part of a driver's row (or result set, at its current row)
// the decoders need: *sql.Row, *sql.Rows, pgx.Row and pgx.Rows all have it.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set as All walks it. The caller closes it: the drivers'
// Close methods differ.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// Times is how one store's time columns scan.
type Times interface {
	// Dest returns a fresh Scan destination for a NOT NULL time column,
	// and Time reads it back after Scan.
	Dest() any
	Time(dest any) (time.Time, error)
	// OptDest and OptTime are the same for a column that may hold no time.
	OptDest() any
	OptTime(dest any) (*time.Time, error)
}

// All scans every row of rows with scan: the one loop every list shares,
// so none of them can forget rows.Err. It returns an empty (not nil) slice
// when nothing matches, so lists encode as [] rather than null. Errors
// come back unwrapped; callers add their prefix.
func All[T any](rows Rows, scan func(Row) (T, error)) ([]T, error) {
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

// One scans the one row a read by ID returns, with the errors every Get
// shares: noRows (the driver's "no row" error) becomes store.ErrNotFound
// named by kind and id, any other failure is prefixed "get <kind> <id>".
func One[T any](row Row, scan func(Row) (T, error), noRows error, kind, id string) (T, error) {
	v, err := scan(row)
	if errors.Is(err, noRows) {
		var zero T
		return zero, fmt.Errorf("%s %q: %w", kind, id, store.ErrNotFound)
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("get %s %q: %w", kind, id, err)
	}
	return v, nil
}

// Decoder decodes rows of the shared tables for one store. Its methods
// have the shape All and One take.
type Decoder struct {
	Times Times
}

// scan is one row's read: the destinations for its time columns, and how
// to fill the record's fields from them once Scan has run.
type scan struct {
	tm   Times
	fill []func() error
}

func (d Decoder) scan() *scan { return &scan{tm: d.Times} }

// at is the Scan destination for a NOT NULL time column read into t.
func (s *scan) at(t *time.Time) any {
	dest := s.tm.Dest()
	s.fill = append(s.fill, func() (err error) {
		*t, err = s.tm.Time(dest)
		return err
	})
	return dest
}

// opt is the Scan destination for a nullable time column read into t.
func (s *scan) opt(t **time.Time) any {
	dest := s.tm.OptDest()
	s.fill = append(s.fill, func() (err error) {
		*t, err = s.tm.OptTime(dest)
		return err
	})
	return dest
}

// row scans r into dest, then fills the time fields at and opt named.
func (s *scan) row(r Row, dest ...any) error {
	if err := r.Scan(dest...); err != nil {
		return err
	}
	for _, f := range s.fill {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// decode reads a row whose fields need nothing done after the scan but
// their time columns: dest names where each column goes.
func decode[T any](d Decoder, r Row, dest func(sc *scan, v *T) []any) (T, error) {
	var v T
	sc := d.scan()
	if err := sc.row(r, dest(sc, &v)...); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}
