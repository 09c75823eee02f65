-- Lifecycle fields (expiry, last start, retention timers, activity, archive)
-- live in one JSON document: they are read with the record and filtered in
-- the control plane, never by SQL.
ALTER TABLE sandboxes ADD COLUMN lifecycle TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(lifecycle));
