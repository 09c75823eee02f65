-- Warm pools sized by demand: SQLite's migration 0020 in PostgreSQL's
-- types. Every pool set before has auto off.
ALTER TABLE pools ADD COLUMN auto boolean NOT NULL DEFAULT false;
