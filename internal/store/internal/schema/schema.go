// Package schema is how the SQL stores version their schema: numbered
// migration files (NNNN_description.sql), each applied once and recorded in
// schema_migrations. Each store applies them in its own transaction, in its
// own SQL; what counts as a migration, their order, and which of them a
// database still lacks are decided here, once for both.
package schema

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load reads every NNNN_name.sql at the root of fsys, sorted by number.
// Duplicate numbers are an error, so two branches that both add "0002"
// cannot both be applied silently.
func Load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must be NNNN_description.sql", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %q and %q share version %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// Pending returns, in order, the migrations of ms whose versions applied
// (what schema_migrations lists) lacks. A listed version ms does not know
// was recorded by a newer binary: Pending refuses the database rather
// than guess, saying it was "<by> by a newer version?".
func Pending(ms []Migration, applied []int, by string) ([]Migration, error) {
	known := map[int]bool{}
	for _, m := range ms {
		known[m.Version] = true
	}
	done := map[int]bool{}
	for _, v := range applied {
		if !known[v] {
			return nil, fmt.Errorf("database has schema version %d, unknown to this binary (%s by a newer version?)", v, by)
		}
		done[v] = true
	}
	var out []Migration
	for _, m := range ms {
		if !done[m.Version] {
			out = append(out, m)
		}
	}
	return out, nil
}
