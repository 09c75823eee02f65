-- Fingerprints of the platform's keys (docs/ARCHITECTURE.md, "Many hosts"):
-- the first ptd sharing the store records its secrets.key's and
-- preview.key's, and a ptd whose key differs refuses to start. Never the
-- keys themselves. A new table only: existing data is untouched.
CREATE TABLE platform_keys (
	name        TEXT PRIMARY KEY,
	fingerprint TEXT NOT NULL,
	origin      TEXT NOT NULL,
	created_at  TEXT NOT NULL
) STRICT;
