-- Sessions (docs/sessions.md): an execution session owned by a context (a vault
-- plus a workflow or an agent session). A context has at most one live
-- session (provisioning, ready, stopping) at a time.
CREATE TABLE sessions (
	id               TEXT PRIMARY KEY,
	org_id           TEXT NOT NULL,
	vault_id         TEXT NOT NULL,
	workflow_id      TEXT NOT NULL DEFAULT '',
	agent_session_id TEXT NOT NULL DEFAULT '',
	template         TEXT NOT NULL,
	sandbox_id       TEXT NOT NULL DEFAULT '',
	status           TEXT NOT NULL,
	reason           TEXT NOT NULL DEFAULT '',
	warm             INTEGER NOT NULL DEFAULT 0,
	version          INTEGER NOT NULL,
	created_at       TEXT NOT NULL,
	updated_at       TEXT NOT NULL,
	ready_at         TEXT,
	ended_at         TEXT
) STRICT;

CREATE UNIQUE INDEX sessions_live_context ON sessions (org_id, vault_id, workflow_id, agent_session_id)
	WHERE status IN ('provisioning', 'ready', 'stopping');
CREATE INDEX sessions_context ON sessions (org_id, vault_id, workflow_id, agent_session_id, created_at DESC);
CREATE INDEX sessions_org_created ON sessions (org_id, created_at DESC, id DESC);
CREATE INDEX sessions_status ON sessions (status);

-- Warm pools: per template, how many sandboxes to keep ready.
CREATE TABLE pools (
	template   TEXT PRIMARY KEY,
	min_ready  INTEGER NOT NULL,
	max        INTEGER NOT NULL,
	updated_at TEXT NOT NULL
) STRICT;

-- Claims pick the oldest running sandbox of the pool org by template.
CREATE INDEX sandboxes_org_template_state ON sandboxes (org_id, template, state, created_at);
