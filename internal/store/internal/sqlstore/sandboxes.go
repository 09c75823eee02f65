// This file is the sandbox reads that are the same in both SQL stores;
// each store keeps its writes and the paged list, whose locking and
// dialect differ.

package sqlstore

import (
	"context"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// SandboxesInStates returns every sandbox in any of states, across orgs,
// oldest first.
func (s *Store) SandboxesInStates(ctx context.Context, states ...sandbox.State) ([]sandbox.Sandbox, error) {
	if len(states) == 0 {
		return []sandbox.Sandbox{}, nil
	}
	cond, args := s.db.AnyOf("state", sqldb.Strings(states))
	return sqldb.List(ctx, s.db, s.db.Decoder().Sandbox, "sandboxes in states",
		`SELECT `+rowscan.SandboxCols+` FROM sandboxes WHERE `+cond+` ORDER BY created_at, id`, args...)
}
