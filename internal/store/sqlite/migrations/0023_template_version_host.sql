-- The host whose ptd builds a platform template version (docs/
-- ARCHITECTURE.md, "Ownership"): a ptd starting on a shared store fails
-- only the versions its own host (or a lost one) left building. Existing
-- rows name none, as before.
ALTER TABLE template_versions ADD COLUMN host_id TEXT NOT NULL DEFAULT '';
