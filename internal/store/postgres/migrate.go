package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/platinum-dev/platinum/internal/store/internal/schema"
)

// migrationFS holds the schema as numbered files (0001_init.sql, …). A
// released file is never edited: change the schema by adding the next one.
// The numbers are this store's own; they need not match SQLite's.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migrate applies the embedded migrations the database lacks.
func migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return err
	}
	ms, err := schema.Load(sub)
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
func applyMigrations(ctx context.Context, pool *pgxpool.Pool, ms []schema.Migration, logger *slog.Logger) error {
	var pending []schema.Migration
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
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
		rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("schema_migrations: %w", err)
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return fmt.Errorf("schema_migrations: %w", err)
		}
		if pending, err = schema.Pending(ms, applied, "migrated"); err != nil {
			return err
		}
		for _, m := range pending {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return fmt.Errorf("migration %s: record: %w", m.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range pending {
		logger.Info("applied schema migration", "migration", m.Name, "store", "postgres")
	}
	return nil
}
