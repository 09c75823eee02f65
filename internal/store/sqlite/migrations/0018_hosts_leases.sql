-- Many hosts (docs/ARCHITECTURE.md, "Many hosts"): the hosts that joined the
-- control plane, leases of the loops that must run once across api
-- processes (and of each api process's liveness), and an index for the
-- per-host sums placement reads.
CREATE TABLE hosts (
	id               TEXT PRIMARY KEY,
	region           TEXT NOT NULL DEFAULT '',
	url              TEXT NOT NULL DEFAULT '',
	state            TEXT NOT NULL,
	generation       INTEGER NOT NULL,
	capacity         TEXT NOT NULL DEFAULT '{}',
	status           TEXT NOT NULL DEFAULT '{}',
	reason           TEXT NOT NULL DEFAULT '',
	registered_at    TEXT NOT NULL,
	heartbeat_at     TEXT NOT NULL,
	state_changed_at TEXT NOT NULL
);

CREATE TABLE leases (
	name       TEXT PRIMARY KEY,
	holder     TEXT NOT NULL,
	generation INTEGER NOT NULL,
	expires_at TEXT NOT NULL
);

CREATE INDEX sandboxes_host ON sandboxes (host_id, state);
