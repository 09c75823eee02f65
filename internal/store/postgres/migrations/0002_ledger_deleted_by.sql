-- Who caused a disposed sandbox's deletion (platform or user), next to its
-- reason: the ledger says why recovery data was kept 30 or 90 days.
ALTER TABLE deletion_ledger ADD COLUMN deleted_by text COLLATE "C" NOT NULL DEFAULT '';
