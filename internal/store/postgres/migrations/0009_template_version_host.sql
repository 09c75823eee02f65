-- The host whose ptd builds a platform template version: SQLite's
-- migration 0023. Existing rows name none, as before.
ALTER TABLE template_versions ADD COLUMN host_id text COLLATE "C" NOT NULL DEFAULT '';
