package postgres

// Advisory lock keys. PostgreSQL's advisory locks are one namespace per
// database, so every key the platform takes is listed here, each a
// distinct constant ("pt" in the high bytes, then a number), to keep later
// users (leases of loops that must run once, host fencing) from colliding.
const (
	// lockMigrate serialises schema migration across ptd processes
	// starting together (transaction-scoped).
	lockMigrate int64 = 0x7074_0000_0000_0001
	// lockEvents is held from taking an event ID to commit
	// (transaction-scoped), so event IDs become visible in ID order.
	lockEvents int64 = 0x7074_0000_0000_0002
)

// lockKeyBase is the high half of LockKey's keys (transaction-scoped): the
// low 32 bits are the FNV-1a hash of the caller's key name, so two names
// that hash alike only wait for each other, never share a holder.
const lockKeyBase int64 = 0x7074_0001_0000_0000
