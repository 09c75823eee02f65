-- Warm pools per runtime class (docs/sessions.md, "Warm creates"): a pool
-- is keyed by template and runtime class; '' is the host's default class,
-- which every pool set before classes had.
CREATE TABLE pools_by_class (
	template   TEXT NOT NULL,
	runtime    TEXT NOT NULL DEFAULT '',
	min_ready  INTEGER NOT NULL,
	max        INTEGER NOT NULL,
	updated_at TEXT NOT NULL,
	PRIMARY KEY (template, runtime)
) STRICT;
INSERT INTO pools_by_class (template, runtime, min_ready, max, updated_at)
	SELECT template, '', min_ready, max, updated_at FROM pools;
DROP TABLE pools;
ALTER TABLE pools_by_class RENAME TO pools;
