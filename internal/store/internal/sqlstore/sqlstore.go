// Package sqlstore is the part of store.Store that is the same in both SQL
// stores: the methods whose queries and checks SQLite and PostgreSQL share
// but for what a store's sqldb.DB supplies (its connections, placeholders,
// the stored form of times, driver errors) and the few spellings Dialect
// names. Each store embeds a Store and adds what its locking or dialect
// makes its own (claims, sandbox and session writes, host registration,
// leases, event writes and pruning). Written once, the two stores cannot
// drift apart; storetest checks both.
package sqlstore

import (
	"time"

	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// Dialect is what the stores spell differently in the shared queries.
type Dialect struct {
	// EmptyBytes is an empty BLOB/bytea literal: ListTemplateBuilds
	// selects it in place of each build's log.
	EmptyBytes string
	// FinishedAt is the stored form of a build's finished_at.
	FinishedAt func(*time.Time) any
}

// Store implements the shared methods on db.
type Store struct {
	db sqldb.DB
	d  Dialect
}

// New returns the shared methods on db, whose dialect spells d.
func New(db sqldb.DB, d Dialect) *Store { return &Store{db: db, d: d} }
