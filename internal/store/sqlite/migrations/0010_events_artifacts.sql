-- Event stream, webhooks and artifacts (docs/events-and-webhooks.md).

-- GET /v1/events reads one org's events after a cursor.
CREATE INDEX events_org ON events (org_id, id);

-- A webhook of an org. cursor is the last event ID fanned out to it (it
-- starts at the newest event when the webhook is created, so a webhook
-- never receives history). events is a JSON array of event types; empty
-- means every type. secret is sealed when ptd has a secrets key.
CREATE TABLE webhooks (
	id         TEXT PRIMARY KEY,
	org_id     TEXT NOT NULL,
	url        TEXT NOT NULL,
	events     TEXT NOT NULL CHECK (json_valid(events)),
	secret     TEXT NOT NULL,
	cursor     INTEGER NOT NULL,
	created_at TEXT NOT NULL
) STRICT;

CREATE INDEX webhooks_org ON webhooks (org_id, created_at, id);

-- One event to send to one webhook. Rows live in the store so a restart
-- resumes pending deliveries and their backoff.
CREATE TABLE webhook_deliveries (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	webhook_id      TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
	org_id          TEXT NOT NULL,
	event_id        INTEGER NOT NULL,
	status          TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_attempt_at TEXT NOT NULL,
	last_status     INTEGER NOT NULL DEFAULT 0,
	last_error      TEXT NOT NULL DEFAULT '',
	created_at      TEXT NOT NULL,
	updated_at      TEXT NOT NULL,
	UNIQUE (webhook_id, event_id)
) STRICT;

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at, id);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, id);

-- A file or directory (tar) exported from a sandbox into the object store.
-- It does not reference the sandbox row: it outlives the sandbox.
CREATE TABLE artifacts (
	id           TEXT PRIMARY KEY,
	org_id       TEXT NOT NULL,
	sandbox_id   TEXT NOT NULL,
	name         TEXT NOT NULL,
	path         TEXT NOT NULL,
	kind         TEXT NOT NULL CHECK (kind IN ('file', 'directory')),
	content_type TEXT NOT NULL,
	size_bytes   INTEGER NOT NULL,
	sha256       TEXT NOT NULL,
	bucket       TEXT NOT NULL,
	object_key   TEXT NOT NULL,
	created_at   TEXT NOT NULL
) STRICT;

CREATE INDEX artifacts_org ON artifacts (org_id, created_at, id);
CREATE INDEX artifacts_sandbox ON artifacts (org_id, sandbox_id, created_at, id);
