-- The whole schema of SQLite's migrations 0001 to 0015, in PostgreSQL's
-- types. Text is COLLATE "C" throughout: lists order by id and state
-- bytewise, as on SQLite, whatever the database's default collation.
-- Times are timestamptz: microseconds, the six fractional digits the API
-- shows. Documents a filter reads (metadata) are jsonb; documents only
-- read whole (env, lifecycle, event data, …) are json, which keeps the
-- text as written and accepts every JSON string (jsonb refuses \u0000).

CREATE TABLE orgs (
	id         text COLLATE "C" PRIMARY KEY,
	name       text COLLATE "C" NOT NULL,
	created_at timestamptz NOT NULL,
	quotas     json NOT NULL DEFAULT '{}'
);

CREATE TABLE tokens (
	id         text COLLATE "C" PRIMARY KEY,
	org_id     text COLLATE "C" NOT NULL,
	role       text COLLATE "C" NOT NULL,
	hash       text COLLATE "C" NOT NULL UNIQUE,
	created_at timestamptz NOT NULL,
	sandbox_id text COLLATE "C" NOT NULL DEFAULT '',
	project_id text COLLATE "C" NOT NULL DEFAULT ''
);

CREATE INDEX tokens_org ON tokens (org_id);
CREATE INDEX tokens_sandbox ON tokens (sandbox_id) WHERE sandbox_id <> '';

CREATE TABLE template_versions (
	id         text COLLATE "C" PRIMARY KEY,
	slug       text COLLATE "C" NOT NULL,
	status     text COLLATE "C" NOT NULL,
	progress   text COLLATE "C" NOT NULL DEFAULT '',
	rootfs     text COLLATE "C" NOT NULL DEFAULT '',
	size_bytes bigint NOT NULL DEFAULT 0,
	error      text COLLATE "C" NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE INDEX template_versions_slug ON template_versions (slug, created_at DESC, id DESC);
CREATE INDEX template_versions_created ON template_versions (created_at DESC, id DESC);

CREATE TABLE sandboxes (
	id                  text COLLATE "C" PRIMARY KEY,
	org_id              text COLLATE "C" NOT NULL,
	name                text COLLATE "C" NOT NULL DEFAULT '',
	state               text COLLATE "C" NOT NULL,
	template            text COLLATE "C" NOT NULL DEFAULT '',
	template_version_id text COLLATE "C" NOT NULL DEFAULT '',
	cpu                 double precision NOT NULL DEFAULT 0,
	ram_mb              bigint NOT NULL DEFAULT 0,
	disk_gb             bigint NOT NULL DEFAULT 0,
	env                 json NOT NULL DEFAULT '{}',
	metadata            jsonb NOT NULL DEFAULT '{}',
	host_id             text COLLATE "C" NOT NULL DEFAULT '',
	address             text COLLATE "C" NOT NULL DEFAULT '',
	agent_token         text COLLATE "C" NOT NULL DEFAULT '',
	reason              text COLLATE "C" NOT NULL DEFAULT '',
	version             bigint NOT NULL,
	created_at          timestamptz NOT NULL,
	updated_at          timestamptz NOT NULL,
	deleted_at          timestamptz,
	lifecycle           json NOT NULL DEFAULT '{}',
	parent_id           text COLLATE "C" NOT NULL DEFAULT '',
	project_id          text COLLATE "C" NOT NULL DEFAULT ''
);

CREATE INDEX sandboxes_org_created ON sandboxes (org_id, created_at DESC, id DESC);
CREATE INDEX sandboxes_created ON sandboxes (created_at DESC, id DESC);
CREATE INDEX sandboxes_state ON sandboxes (state);
CREATE INDEX sandboxes_parent ON sandboxes (org_id, parent_id, created_at DESC, id DESC);
CREATE UNIQUE INDEX sandboxes_live_name ON sandboxes (org_id, name)
	WHERE name <> '' AND state NOT IN ('deleting', 'deleted');
CREATE INDEX sandboxes_org_project ON sandboxes (org_id, project_id);
CREATE INDEX sandboxes_org_template_state ON sandboxes (org_id, template, state, created_at, id);
CREATE INDEX sandboxes_metadata ON sandboxes USING gin (metadata jsonb_path_ops);

-- An identity never reuses an ID. IDs are taken under the events advisory
-- lock (see events.go), so they become visible in ID order and "events
-- after ID n" is a cursor that never skips a late commit.
CREATE TABLE events (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	org_id     text COLLATE "C" NOT NULL,
	sandbox_id text COLLATE "C" NOT NULL,
	type       text COLLATE "C" NOT NULL,
	data       json NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE INDEX events_sandbox ON events (sandbox_id, id);
CREATE INDEX events_org ON events (org_id, id);
CREATE INDEX events_created ON events (created_at, id);

CREATE TABLE deletion_ledger (
	id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	org_id          text COLLATE "C" NOT NULL,
	sandbox_id      text COLLATE "C" NOT NULL,
	deleted_reason  text COLLATE "C" NOT NULL,
	purged_at       timestamptz NOT NULL,
	objects         json NOT NULL DEFAULT '[]',
	snapshot_bucket text COLLATE "C" NOT NULL DEFAULT ''
);

CREATE TABLE object_deletions (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	bucket     text COLLATE "C" NOT NULL,
	key        text COLLATE "C" NOT NULL,
	kind       text COLLATE "C" NOT NULL,
	queued_at  timestamptz NOT NULL,
	attempts   integer NOT NULL DEFAULT 0,
	last_error text COLLATE "C" NOT NULL DEFAULT ''
);

CREATE TABLE snapshots (
	id           text COLLATE "C" PRIMARY KEY,
	org_id       text COLLATE "C" NOT NULL,
	sandbox_id   text COLLATE "C" NOT NULL,
	name         text COLLATE "C" NOT NULL DEFAULT '',
	kind         text COLLATE "C" NOT NULL,
	state        text COLLATE "C" NOT NULL,
	memory       boolean NOT NULL DEFAULT false,
	size_bytes   bigint NOT NULL DEFAULT 0,
	source       json NOT NULL DEFAULT '{}',
	host_id      text COLLATE "C" NOT NULL DEFAULT '',
	disk_image   text COLLATE "C" NOT NULL DEFAULT '',
	memory_image text COLLATE "C" NOT NULL DEFAULT '',
	bucket       text COLLATE "C" NOT NULL DEFAULT '',
	manifest_key text COLLATE "C" NOT NULL DEFAULT '',
	reason       text COLLATE "C" NOT NULL DEFAULT '',
	created_at   timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL
);

CREATE INDEX snapshots_by_sandbox ON snapshots (org_id, sandbox_id, created_at DESC, id DESC);
CREATE INDEX snapshots_by_state ON snapshots (state);

CREATE TABLE projects (
	id         text COLLATE "C" PRIMARY KEY,
	org_id     text COLLATE "C" NOT NULL,
	name       text COLLATE "C" NOT NULL,
	is_default boolean NOT NULL DEFAULT false,
	created_at timestamptz NOT NULL
);

CREATE UNIQUE INDEX projects_org_name ON projects (org_id, name);
CREATE UNIQUE INDEX projects_org_default ON projects (org_id) WHERE is_default;

CREATE TABLE idempotency_keys (
	scope        text COLLATE "C" NOT NULL,
	key          text COLLATE "C" NOT NULL,
	request_hash text COLLATE "C" NOT NULL,
	claim        text COLLATE "C" NOT NULL,
	done         boolean NOT NULL DEFAULT false,
	status       integer NOT NULL DEFAULT 0,
	header       json NOT NULL DEFAULT '{}',
	body         bytea NOT NULL DEFAULT '',
	created_at   timestamptz NOT NULL,
	locked_until timestamptz NOT NULL,
	expires_at   timestamptz NOT NULL,
	PRIMARY KEY (scope, key)
);

CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

CREATE TABLE sessions (
	id               text COLLATE "C" PRIMARY KEY,
	org_id           text COLLATE "C" NOT NULL,
	vault_id         text COLLATE "C" NOT NULL,
	workflow_id      text COLLATE "C" NOT NULL DEFAULT '',
	agent_session_id text COLLATE "C" NOT NULL DEFAULT '',
	template         text COLLATE "C" NOT NULL,
	sandbox_id       text COLLATE "C" NOT NULL DEFAULT '',
	status           text COLLATE "C" NOT NULL,
	reason           text COLLATE "C" NOT NULL DEFAULT '',
	warm             boolean NOT NULL DEFAULT false,
	version          bigint NOT NULL,
	created_at       timestamptz NOT NULL,
	updated_at       timestamptz NOT NULL,
	ready_at         timestamptz,
	ended_at         timestamptz
);

CREATE UNIQUE INDEX sessions_live_context ON sessions (org_id, vault_id, workflow_id, agent_session_id)
	WHERE status IN ('provisioning', 'ready', 'stopping');
CREATE INDEX sessions_context ON sessions (org_id, vault_id, workflow_id, agent_session_id, created_at DESC);
CREATE INDEX sessions_org_created ON sessions (org_id, created_at DESC, id DESC);
CREATE INDEX sessions_status ON sessions (status);

CREATE TABLE pools (
	template   text COLLATE "C" PRIMARY KEY,
	min_ready  integer NOT NULL,
	max        integer NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE TABLE webhooks (
	id         text COLLATE "C" PRIMARY KEY,
	org_id     text COLLATE "C" NOT NULL,
	url        text COLLATE "C" NOT NULL,
	events     json NOT NULL,
	secret     text COLLATE "C" NOT NULL,
	cursor     bigint NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE INDEX webhooks_org ON webhooks (org_id, created_at, id);

CREATE TABLE webhook_deliveries (
	id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	webhook_id      text COLLATE "C" NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
	org_id          text COLLATE "C" NOT NULL,
	event_id        bigint NOT NULL,
	status          text COLLATE "C" NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
	attempts        integer NOT NULL DEFAULT 0,
	next_attempt_at timestamptz NOT NULL,
	last_status     integer NOT NULL DEFAULT 0,
	last_error      text COLLATE "C" NOT NULL DEFAULT '',
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	UNIQUE (webhook_id, event_id)
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at, id);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, id);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id) WHERE status = 'pending';

CREATE TABLE artifacts (
	id           text COLLATE "C" PRIMARY KEY,
	org_id       text COLLATE "C" NOT NULL,
	sandbox_id   text COLLATE "C" NOT NULL,
	name         text COLLATE "C" NOT NULL,
	path         text COLLATE "C" NOT NULL,
	kind         text COLLATE "C" NOT NULL CHECK (kind IN ('file', 'directory')),
	content_type text COLLATE "C" NOT NULL,
	size_bytes   bigint NOT NULL,
	sha256       text COLLATE "C" NOT NULL,
	bucket       text COLLATE "C" NOT NULL,
	object_key   text COLLATE "C" NOT NULL,
	created_at   timestamptz NOT NULL
);

CREATE INDEX artifacts_org ON artifacts (org_id, created_at, id);
CREATE INDEX artifacts_sandbox ON artifacts (org_id, sandbox_id, created_at, id);

CREATE TABLE event_retention (
	id             integer PRIMARY KEY CHECK (id = 1),
	pruned_through bigint NOT NULL
);

INSERT INTO event_retention (id, pruned_through) VALUES (1, 0);
