-- Custom templates (docs/templates.md): a version may belong to an org and
-- carry its spec (settings, source, layers, started-state snapshot).
ALTER TABLE template_versions ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
ALTER TABLE template_versions ADD COLUMN build_id TEXT NOT NULL DEFAULT '';
ALTER TABLE template_versions ADD COLUMN spec TEXT NOT NULL DEFAULT '{}';
CREATE INDEX template_versions_org_slug ON template_versions (org_id, slug, created_at DESC, id DESC);

-- One row per build of a custom template; a failed build leaves no version.
CREATE TABLE template_builds (
	id          TEXT PRIMARY KEY,
	org_id      TEXT NOT NULL,
	slug        TEXT NOT NULL,
	status      TEXT NOT NULL,
	request     TEXT NOT NULL DEFAULT '{}',
	version_id  TEXT NOT NULL DEFAULT '',
	error       TEXT NOT NULL DEFAULT '',
	failure     TEXT NOT NULL DEFAULT '',
	log         BLOB NOT NULL DEFAULT x'',
	box_id      TEXT NOT NULL DEFAULT '',
	created_at  TEXT NOT NULL,
	updated_at  TEXT NOT NULL,
	finished_at TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX template_builds_org_slug ON template_builds (org_id, slug, created_at DESC, id DESC);
CREATE INDEX template_builds_status ON template_builds (status);

-- Dockerfile layer cache: a step's key → the build disk's snapshot after it.
CREATE TABLE template_build_cache (
	org_id      TEXT NOT NULL,
	key         TEXT NOT NULL,
	snapshot_id TEXT NOT NULL,
	ready       INTEGER NOT NULL DEFAULT 0,
	created_at  TEXT NOT NULL,
	used_at     TEXT NOT NULL,
	PRIMARY KEY (org_id, key)
) STRICT;

-- An org's registry credentials, the secret sealed.
CREATE TABLE registry_credentials (
	org_id     TEXT NOT NULL,
	registry   TEXT NOT NULL,
	username   TEXT NOT NULL DEFAULT '',
	sealed     BLOB NOT NULL,
	kind       TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	PRIMARY KEY (org_id, registry)
) STRICT;
