package sqlite

import (
	"context"
	"fmt"
	"slices"
)

// Dump reads every row of every table (found in sqlite_master, so a table
// a later migration adds is included) in one read transaction, each row
// printed as one string and each table's rows sorted. Tests compare two
// dumps to show that a call changed nothing (the fuzz targets of the API
// transports, docs/testing.md).
func (s *Store) Dump(ctx context.Context) (map[string][]string, error) {
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	names, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		return nil, err
	}
	var tables []string
	for names.Next() {
		var n string
		if err := names.Scan(&n); err != nil {
			names.Close()
			return nil, err
		}
		tables = append(tables, n)
	}
	names.Close()
	if err := names.Err(); err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(tables))
	for _, table := range tables {
		rows, err := tx.QueryContext(ctx, `SELECT * FROM "`+table+`"`)
		if err != nil {
			return nil, err
		}
		cols, err := rows.Columns()
		if err != nil {
			rows.Close()
			return nil, err
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		lines := []string{}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			lines = append(lines, fmt.Sprintf("%q", vals))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("dump %s: %w", table, err)
		}
		slices.Sort(lines)
		out[table] = lines
	}
	return out, nil
}
