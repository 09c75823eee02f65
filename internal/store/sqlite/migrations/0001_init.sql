-- Initial schema. Times are TEXT in sandbox.TimeFormat (UTC, six fractional
-- digits): fixed width, so text order is time order and ties are exact.

CREATE TABLE orgs (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	created_at TEXT NOT NULL
) STRICT;

CREATE TABLE tokens (
	id         TEXT PRIMARY KEY,
	org_id     TEXT NOT NULL,
	role       TEXT NOT NULL,
	hash       TEXT NOT NULL UNIQUE,
	created_at TEXT NOT NULL
) STRICT;

CREATE INDEX tokens_org ON tokens (org_id);

CREATE TABLE template_versions (
	id         TEXT PRIMARY KEY,
	slug       TEXT NOT NULL,
	status     TEXT NOT NULL,
	progress   TEXT NOT NULL DEFAULT '',
	rootfs     TEXT NOT NULL DEFAULT '',
	size_bytes INTEGER NOT NULL DEFAULT 0,
	error      TEXT NOT NULL DEFAULT '',
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT;

CREATE INDEX template_versions_slug ON template_versions (slug, created_at DESC, id DESC);
CREATE INDEX template_versions_created ON template_versions (created_at DESC, id DESC);

CREATE TABLE sandboxes (
	id                  TEXT PRIMARY KEY,
	org_id              TEXT NOT NULL,
	name                TEXT NOT NULL DEFAULT '',
	state               TEXT NOT NULL,
	template            TEXT NOT NULL DEFAULT '',
	template_version_id TEXT NOT NULL DEFAULT '',
	cpu                 REAL NOT NULL DEFAULT 0,
	ram_mb              INTEGER NOT NULL DEFAULT 0,
	disk_gb             INTEGER NOT NULL DEFAULT 0,
	env                 TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(env)),
	metadata            TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
	host_id             TEXT NOT NULL DEFAULT '',
	address             TEXT NOT NULL DEFAULT '',
	agent_token         TEXT NOT NULL DEFAULT '',
	reason              TEXT NOT NULL DEFAULT '',
	version             INTEGER NOT NULL,
	created_at          TEXT NOT NULL,
	updated_at          TEXT NOT NULL,
	deleted_at          TEXT
) STRICT;

CREATE INDEX sandboxes_org_created ON sandboxes (org_id, created_at DESC, id DESC);
CREATE INDEX sandboxes_created ON sandboxes (created_at DESC, id DESC);
CREATE INDEX sandboxes_state ON sandboxes (state);

-- AUTOINCREMENT: an ID is never reused, so "events after ID n" is a safe
-- cursor even across deletes.
CREATE TABLE events (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	org_id     TEXT NOT NULL,
	sandbox_id TEXT NOT NULL,
	type       TEXT NOT NULL,
	data       TEXT NOT NULL CHECK (json_valid(data)),
	created_at TEXT NOT NULL
) STRICT;

CREATE INDEX events_sandbox ON events (sandbox_id, id);
