-- Warm pools per runtime class: SQLite's migration 0019 in PostgreSQL's
-- types. A pool is keyed by template and runtime class; '' is the host's
-- default class, which every pool set before classes had.
ALTER TABLE pools ADD COLUMN runtime text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE pools DROP CONSTRAINT pools_pkey;
ALTER TABLE pools ADD PRIMARY KEY (template, runtime);
