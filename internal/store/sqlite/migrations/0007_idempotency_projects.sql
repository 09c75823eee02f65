-- Projects (docs/access.md): every sandbox belongs to one project of its org;
-- every org has one default project (created by ptd at start-up, which also
-- moves sandboxes that predate projects into it). Tokens may be scoped to
-- a project. Orgs may carry quota overrides. Idempotency keys remember the
-- first answer to a mutating request for 24 hours.

CREATE TABLE projects (
	id         TEXT PRIMARY KEY,
	org_id     TEXT NOT NULL,
	name       TEXT NOT NULL,
	is_default INTEGER NOT NULL DEFAULT 0,
	created_at TEXT NOT NULL
) STRICT;

CREATE UNIQUE INDEX projects_org_name ON projects (org_id, name);
CREATE UNIQUE INDEX projects_org_default ON projects (org_id) WHERE is_default = 1;

ALTER TABLE sandboxes ADD COLUMN project_id TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_org_project ON sandboxes (org_id, project_id);

ALTER TABLE tokens ADD COLUMN project_id TEXT NOT NULL DEFAULT '';

ALTER TABLE orgs ADD COLUMN quotas TEXT NOT NULL DEFAULT '{}';

CREATE TABLE idempotency_keys (
	scope        TEXT NOT NULL,
	key          TEXT NOT NULL,
	request_hash TEXT NOT NULL,
	claim        TEXT NOT NULL,
	done         INTEGER NOT NULL DEFAULT 0,
	status       INTEGER NOT NULL DEFAULT 0,
	header       TEXT NOT NULL DEFAULT '{}',
	body         BLOB NOT NULL DEFAULT x'',
	created_at   TEXT NOT NULL,
	locked_until TEXT NOT NULL,
	expires_at   TEXT NOT NULL,
	PRIMARY KEY (scope, key)
) STRICT;

CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
