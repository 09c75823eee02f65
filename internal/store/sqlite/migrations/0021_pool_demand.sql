-- Warm pools' demand in the store (docs/sessions.md, "Demand-sized pools"):
-- the claims an auto pool sizes its target from and its recent boots, so
-- that every ptd sharing the store sees them and a restart keeps them.
-- New tables only: existing data is untouched.
CREATE TABLE pool_claims (
	id           TEXT PRIMARY KEY,
	template     TEXT NOT NULL,
	runtime      TEXT NOT NULL DEFAULT '',
	claimed_at   TEXT NOT NULL,
	warm         INTEGER NOT NULL,
	handing_over INTEGER NOT NULL DEFAULT 0
) STRICT;
-- The pool loop reads the window's claims every pass and prunes older ones.
CREATE INDEX pool_claims_at ON pool_claims (claimed_at);

CREATE TABLE pool_boots (
	id        INTEGER PRIMARY KEY,
	template  TEXT NOT NULL,
	runtime   TEXT NOT NULL DEFAULT '',
	booted_at TEXT NOT NULL,
	took_us   INTEGER NOT NULL
) STRICT;
CREATE INDEX pool_boots_pool ON pool_boots (template, runtime, booted_at);
