package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// OrgUsage sums the org's sandboxes in any of states.
func (s *Store) OrgUsage(ctx context.Context, orgID string, states ...sandbox.State) (store.Usage, error) {
	if len(states) == 0 {
		return store.Usage{}, nil
	}
	args := []any{orgID}
	for _, st := range states {
		args = append(args, string(st))
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(states)), ",")
	var u store.Usage
	err := s.r.QueryRowContext(ctx,
		`SELECT count(*), coalesce(sum(cpu), 0), coalesce(sum(ram_mb), 0) FROM sandboxes WHERE org_id = ? AND state IN (`+marks+`)`, args...).
		Scan(&u.Sandboxes, &u.CPU, &u.RAMMB)
	if err != nil {
		return store.Usage{}, fmt.Errorf("org %q usage: %w", orgID, err)
	}
	return u, nil
}
