package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// migrationFS holds the schema as numbered files (0001_init.sql, …). A
// released file is never edited: change the schema by adding the next one.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads every NNNN_name.sql at the root of fsys, sorted by
// number. Duplicate numbers are an error, so two branches that both add
// "0002" cannot both be applied silently.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var ms []migration
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
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies, in one write transaction, every migration in fsys that
// schema_migrations does not list yet. Either all pending migrations apply or
// none do. A database that has a version this binary does not know was
// written by a newer ptd; migrate refuses it rather than guess.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS, logger *slog.Logger) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return err
	}
	known := map[int]bool{}
	for _, m := range ms {
		known[m.version] = true
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit

	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}

	applied := map[int]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("schema_migrations: %w", err)
		}
		if !known[v] {
			rows.Close()
			return fmt.Errorf("database has schema version %d, unknown to this binary (written by a newer version?)", v)
		}
		applied[v] = true
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}

	var done []string
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, sandbox.FormatTime(time.Now())); err != nil {
			return fmt.Errorf("migration %s: record: %w", m.name, err)
		}
		done = append(done, m.name)
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, name := range done {
		logger.Info("applied schema migration", "migration", name)
	}
	return nil
}
