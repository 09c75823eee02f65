package sqlite

import (
	"context"
	"path/filepath"
	"testing"
)

// TestCachedStatementNestedUse: a connection caches its prepared queries,
// and the same query run again while rows of it are still open (inside
// one transaction, so on the same connection) gets its own statement and
// both read all their rows; afterwards the cached one is reused.
func TestCachedStatementNestedUse(t *testing.T) {
	st, err := Open(context.Background(), filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	tx, err := st.r.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const q = `SELECT value FROM json_each('[1,2,3]') WHERE value >= ?`
	for round := range 2 {
		outer, err := tx.QueryContext(ctx, q, 1)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for outer.Next() {
			var v int
			if err := outer.Scan(&v); err != nil {
				t.Fatal(err)
			}
			inner, err := tx.QueryContext(ctx, q, v)
			if err != nil {
				t.Fatal(err)
			}
			for inner.Next() {
				var w int
				inner.Scan(&w)
				sum += w
			}
			if err := inner.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := outer.Err(); err != nil {
			t.Fatal(err)
		}
		outer.Close()
		// v=1: 1+2+3, v=2: 2+3, v=3: 3.
		if sum != 14 {
			t.Fatalf("round %d: nested sums = %d, want 14", round, sum)
		}
	}
}
