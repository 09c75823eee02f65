-- Parent/child sandboxes and names unique per org among live sandboxes.
ALTER TABLE sandboxes ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_parent ON sandboxes (org_id, parent_id, created_at DESC, id DESC);
CREATE UNIQUE INDEX sandboxes_live_name ON sandboxes (org_id, name)
	WHERE name <> '' AND state NOT IN ('deleting', 'deleted');
