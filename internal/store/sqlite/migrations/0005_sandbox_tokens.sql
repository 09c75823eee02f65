-- Sandbox-scoped tokens: an agent inside a sandbox manages only its
-- children with the token the sandbox was given.
ALTER TABLE tokens ADD COLUMN sandbox_id TEXT NOT NULL DEFAULT '';
