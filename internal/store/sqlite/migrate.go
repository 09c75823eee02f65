package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store/internal/schema"
)

// migrationFS holds the schema as numbered files (0001_init.sql, …). A
// released file is never edited: change the schema by adding the next one.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// loadMigrations reads the numbered files of fsys (schema.Load).
var loadMigrations = schema.Load

// migrate applies, in one write transaction, every migration in fsys that
// schema_migrations does not list yet. Either all pending migrations apply or
// none do. A database that has a version this binary does not know was
// written by a newer ptd; migrate refuses it rather than guess.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS, logger *slog.Logger) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return err
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
	applied, err := queryAll(ctx, tx, func(sc scanner) (v int, err error) { return v, sc.Scan(&v) },
		`SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	pending, err := schema.Pending(ms, applied, "written")
	if err != nil {
		return err
	}

	for _, m := range pending {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, sandbox.FormatTime(time.Now())); err != nil {
			return fmt.Errorf("migration %s: record: %w", m.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, m := range pending {
		logger.Info("applied schema migration", "migration", m.Name)
	}
	return nil
}
