-- Custom templates (docs/templates.md): a version may belong to an org and
-- carry its spec (settings, source, layers, started-state snapshot).
ALTER TABLE template_versions ADD COLUMN org_id text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE template_versions ADD COLUMN build_id text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE template_versions ADD COLUMN spec json NOT NULL DEFAULT '{}';
CREATE INDEX template_versions_org_slug ON template_versions (org_id, slug, created_at DESC, id DESC);

-- One row per build of a custom template; a failed build leaves no version.
CREATE TABLE template_builds (
	id          text COLLATE "C" PRIMARY KEY,
	org_id      text COLLATE "C" NOT NULL,
	slug        text COLLATE "C" NOT NULL,
	status      text COLLATE "C" NOT NULL,
	request     text NOT NULL DEFAULT '{}',
	version_id  text COLLATE "C" NOT NULL DEFAULT '',
	error       text NOT NULL DEFAULT '',
	failure     text NOT NULL DEFAULT '',
	log         bytea NOT NULL DEFAULT '',
	box_id      text COLLATE "C" NOT NULL DEFAULT '',
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL,
	finished_at timestamptz
);
CREATE INDEX template_builds_org_slug ON template_builds (org_id, slug, created_at DESC, id DESC);
CREATE INDEX template_builds_status ON template_builds (status);

-- Dockerfile layer cache: a step's key → the build disk's snapshot after it.
CREATE TABLE template_build_cache (
	org_id      text COLLATE "C" NOT NULL,
	key         text COLLATE "C" NOT NULL,
	snapshot_id text COLLATE "C" NOT NULL,
	ready       boolean NOT NULL DEFAULT false,
	created_at  timestamptz NOT NULL,
	used_at     timestamptz NOT NULL,
	PRIMARY KEY (org_id, key)
);

-- An org's registry credentials, the secret sealed.
CREATE TABLE registry_credentials (
	org_id     text COLLATE "C" NOT NULL,
	registry   text COLLATE "C" NOT NULL,
	username   text NOT NULL DEFAULT '',
	sealed     bytea NOT NULL,
	kind       text COLLATE "C" NOT NULL,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (org_id, registry)
);
