// Package sqlstore gathers the parts of store.Store that are written once
// for both SQL stores, so each store embeds one value and adds only what it
// does its own way (its transactions, locking and dialect).
package sqlstore

import (
	"github.com/platinum-dev/platinum/internal/store/internal/builds"
	"github.com/platinum-dev/platinum/internal/store/internal/eventstore"
	"github.com/platinum-dev/platinum/internal/store/internal/feeds"
	"github.com/platinum-dev/platinum/internal/store/internal/hosts"
	"github.com/platinum-dev/platinum/internal/store/internal/idemkeys"
	"github.com/platinum-dev/platinum/internal/store/internal/orgs"
	"github.com/platinum-dev/platinum/internal/store/internal/sessionstore"
	"github.com/platinum-dev/platinum/internal/store/internal/snapshots"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// The parts, named apart so that Store can embed them all.
type (
	buildStore    = builds.Store
	snapshotStore = snapshots.Store
	idemKeys      = idemkeys.Keys
	orgStore      = orgs.Store
	feedStore     = feeds.Store
	sessionStore  = sessionstore.Store
	eventStore    = eventstore.Store
	hostStore     = hosts.Store
)

// Store is the shared parts on one store's connections: the template build
// store (internal/builds), snapshots (internal/snapshots), idempotency keys
// but their claim (internal/idemkeys), orgs, tokens and projects in part
// (internal/orgs), webhooks, deliveries and artifacts in part
// (internal/feeds), sessions and pools in part (internal/sessionstore), the
// event log's reads (internal/eventstore), and host reads and lease release
// (internal/hosts).
type Store struct {
	*buildStore
	*snapshotStore
	*idemKeys
	*orgStore
	*feedStore
	*sessionStore
	*eventStore
	*hostStore
}

// New returns the shared parts on db; d is what its dialect spells
// differently in the template build store.
func New(db sqldb.DB, d builds.Dialect) *Store {
	return &Store{
		buildStore:    builds.New(db, d),
		snapshotStore: snapshots.New(db),
		idemKeys:      idemkeys.New(db),
		orgStore:      orgs.New(db),
		feedStore:     feeds.New(db),
		sessionStore:  sessionstore.New(db),
		eventStore:    eventstore.New(db),
		hostStore:     hosts.New(db),
	}
}
