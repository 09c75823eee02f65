-- Final disposal: the deletion ledger records what a purge removed, and
-- object deletions are queued and carried out asynchronously.
CREATE TABLE deletion_ledger (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	org_id          TEXT NOT NULL,
	sandbox_id      TEXT NOT NULL,
	deleted_reason  TEXT NOT NULL,
	purged_at       TEXT NOT NULL,
	objects         TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(objects)),
	snapshot_bucket TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE TABLE object_deletions (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	bucket   TEXT NOT NULL,
	key      TEXT NOT NULL,
	kind     TEXT NOT NULL,
	queued_at TEXT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT ''
) STRICT;
