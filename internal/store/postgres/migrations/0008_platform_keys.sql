-- Fingerprints of the platform's keys: SQLite's migration 0022 in
-- PostgreSQL's types. The first ptd sharing the store records its
-- secrets.key's and preview.key's, and a ptd whose key differs refuses to
-- start. Never the keys themselves. A new table only.
CREATE TABLE platform_keys (
	name        text COLLATE "C" PRIMARY KEY,
	fingerprint text NOT NULL,
	origin      text NOT NULL,
	created_at  timestamptz NOT NULL
);
