-- Warm pools sized by demand (docs/sessions.md, "Demand-sized pools"): a
-- pool with auto set keeps a ready target computed from recent claims,
-- between min_ready and max. Every pool set before has it off.
ALTER TABLE pools ADD COLUMN auto INTEGER NOT NULL DEFAULT 0;
