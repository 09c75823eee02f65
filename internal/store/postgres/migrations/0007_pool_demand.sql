-- Warm pools' demand in the store: SQLite's migration 0021 in PostgreSQL's
-- types. Every ptd sharing the store sees the claims and boots an auto
-- pool sizes itself from, and a restart keeps them. New tables only.
CREATE TABLE pool_claims (
	id           text COLLATE "C" PRIMARY KEY,
	template     text COLLATE "C" NOT NULL,
	runtime      text COLLATE "C" NOT NULL DEFAULT '',
	claimed_at   timestamptz NOT NULL,
	warm         boolean NOT NULL,
	handing_over boolean NOT NULL DEFAULT false
);
CREATE INDEX pool_claims_at ON pool_claims (claimed_at);

CREATE TABLE pool_boots (
	id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	template  text COLLATE "C" NOT NULL,
	runtime   text COLLATE "C" NOT NULL DEFAULT '',
	booted_at timestamptz NOT NULL,
	took_us   bigint NOT NULL
);
CREATE INDEX pool_boots_pool ON pool_boots (template, runtime, booted_at);
