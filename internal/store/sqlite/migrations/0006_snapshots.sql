-- Snapshots and backups of sandboxes (docs/snapshots.md): a local snapshot is a
-- reflink copy of the disk image (and a checkpoint image when it holds
-- memory) on its host; a backup is the disk in the object store.
CREATE TABLE snapshots (
	id           TEXT PRIMARY KEY,
	org_id       TEXT NOT NULL,
	sandbox_id   TEXT NOT NULL,
	name         TEXT NOT NULL DEFAULT '',
	kind         TEXT NOT NULL,
	state        TEXT NOT NULL,
	memory       INTEGER NOT NULL DEFAULT 0,
	size_bytes   INTEGER NOT NULL DEFAULT 0,
	source       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(source)),
	host_id      TEXT NOT NULL DEFAULT '',
	disk_image   TEXT NOT NULL DEFAULT '',
	memory_image TEXT NOT NULL DEFAULT '',
	bucket       TEXT NOT NULL DEFAULT '',
	manifest_key TEXT NOT NULL DEFAULT '',
	reason       TEXT NOT NULL DEFAULT '',
	created_at   TEXT NOT NULL,
	updated_at   TEXT NOT NULL
) STRICT;

CREATE INDEX snapshots_by_sandbox ON snapshots (org_id, sandbox_id, created_at DESC, id DESC);
CREATE INDEX snapshots_by_state ON snapshots (state);
