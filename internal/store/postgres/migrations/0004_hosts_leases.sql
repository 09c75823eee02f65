-- Many hosts (docs/ARCHITECTURE.md, "Many hosts"): SQLite's migration 0018
-- in PostgreSQL's types. Hosts that joined the control plane, leases of the
-- loops that must run once across api processes (and of each api process's
-- liveness), and an index for the per-host sums placement reads.
CREATE TABLE hosts (
	id               text COLLATE "C" PRIMARY KEY,
	region           text COLLATE "C" NOT NULL DEFAULT '',
	url              text COLLATE "C" NOT NULL DEFAULT '',
	state            text COLLATE "C" NOT NULL,
	generation       bigint NOT NULL,
	capacity         json NOT NULL DEFAULT '{}',
	status           json NOT NULL DEFAULT '{}',
	reason           text COLLATE "C" NOT NULL DEFAULT '',
	registered_at    timestamptz NOT NULL,
	heartbeat_at     timestamptz NOT NULL,
	state_changed_at timestamptz NOT NULL
);

CREATE TABLE leases (
	name       text COLLATE "C" PRIMARY KEY,
	holder     text COLLATE "C" NOT NULL,
	generation bigint NOT NULL,
	expires_at timestamptz NOT NULL
);

CREATE INDEX sandboxes_host ON sandboxes (host_id, state);
