package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFS holds the schema as numbered files (0001_init.sql, …). A
// released file is never edited: change the schema by adding the next one.
// The numbers are this store's own; they need not match SQLite's.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads every NNNN_name.sql of fsys, sorted by number;
// duplicate numbers are an error.
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

// migrate applies the embedded migrations the database lacks.
func migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return err
	}
	ms, err := loadMigrations(sub)
	if err != nil {
		return err
	}
	return applyMigrations(ctx, pool, ms, logger)
}

// applyMigrations applies, in one transaction, every migration
// schema_migrations does not list: all of them or none (PostgreSQL's DDL
// is transactional). The transaction first takes the migration advisory
// lock, so ptd processes starting together queue here: the first applies
// the schema, the others then find it applied. A database with a version
// this binary does not know was migrated by a newer ptd; it is refused.
func applyMigrations(ctx context.Context, pool *pgxpool.Pool, ms []migration, logger *slog.Logger) error {
	known := map[int]bool{}
	for _, m := range ms {
		known[m.version] = true
	}
	var done []string
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		done = nil
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockMigrate); err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return fmt.Errorf("schema_migrations: %w", err)
		}
		applied := map[int]bool{}
		rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("schema_migrations: %w", err)
		}
		vs, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return fmt.Errorf("schema_migrations: %w", err)
		}
		for _, v := range vs {
			if !known[int(v)] {
				return fmt.Errorf("database has schema version %d, unknown to this binary (migrated by a newer version?)", v)
			}
			applied[int(v)] = true
		}
		for _, m := range ms {
			if applied[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return fmt.Errorf("migration %s: record: %w", m.name, err)
			}
			done = append(done, m.name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range done {
		logger.Info("applied schema migration", "migration", name, "store", "postgres")
	}
	return nil
}
