-- Event retention: events older than the retention are pruned. The
-- watermark is the highest event ID pruned so far, so a reader resuming
-- from an older cursor learns that events it never saw are gone instead
-- of silently skipping them.
CREATE TABLE event_retention (
	id             INTEGER PRIMARY KEY CHECK (id = 1),
	pruned_through INTEGER NOT NULL
) STRICT;

INSERT INTO event_retention (id, pruned_through) VALUES (1, 0);
