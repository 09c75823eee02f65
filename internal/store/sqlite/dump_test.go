package sqlite

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/store"
)

// TestDump: every table of the schema is in a dump, a write shows up in
// the next one, and two dumps with no write between them are equal.
func TestDump(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	before, err := s.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != n || n < 10 {
		t.Fatalf("dump has %d tables, the schema %d", len(before), n)
	}
	again, _ := s.Dump(ctx)
	if d := cmp.Diff(before, again); d != "" {
		t.Fatalf("two dumps differ with no write between:\n%s", d)
	}
	if err := s.CreateOrg(ctx, store.Org{ID: "org_x", Name: "acme", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Dump(ctx)
	if len(after["orgs"]) != len(before["orgs"])+1 {
		t.Fatalf("orgs rows: %d, then %d after a create", len(before["orgs"]), len(after["orgs"]))
	}
}
