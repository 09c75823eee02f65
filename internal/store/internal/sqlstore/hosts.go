// This file is the part of store.ClusterStore that is the same in
// both SQL stores: reading hosts and their usage, and releasing a lease. Each store keeps
// the writes whose locking differs (registration, heartbeats, state moves,
// acquiring leases), ListLeases (the dialects cut a prefix differently)
// and LockKey.

package sqlstore

import (
	"context"
	"fmt"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// GetHost returns ErrNotFound if absent.
func (s *Store) GetHost(ctx context.Context, id string) (store.HostRecord, error) {
	return sqldb.One(ctx, s.db, s.db.Decoder().Host, "host", id, `SELECT `+rowscan.HostCols+` FROM hosts WHERE id = ?`, id)
}

// ListHosts returns every host, by ID.
func (s *Store) ListHosts(ctx context.Context) ([]store.HostRecord, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().Host, "list hosts", `SELECT `+rowscan.HostCols+` FROM hosts ORDER BY id`)
}

// HostUsage sums the sandboxes in any of states by host. The sums are
// cast to BIGINT because PostgreSQL sums a bigint column to numeric,
// which does not scan into an int; SQLite's sum is an integer already.
func (s *Store) HostUsage(ctx context.Context, states ...sandbox.State) (map[string]store.Usage, error) {
	out := map[string]store.Usage{}
	if len(states) == 0 {
		return out, nil
	}
	cond, args := s.db.AnyOf("state", sqldb.Strings(states))
	err := s.db.Query(ctx, `SELECT host_id, count(*), coalesce(sum(cpu), 0), CAST(coalesce(sum(ram_mb), 0) AS BIGINT),
		CAST(coalesce(sum(disk_gb), 0) AS BIGINT) FROM sandboxes WHERE `+cond+` GROUP BY host_id`, args, func(rows rowscan.Rows) error {
		for rows.Next() {
			var id string
			var u store.Usage
			if err := rows.Scan(&id, &u.Sandboxes, &u.CPU, &u.RAMMB, &u.DiskGB); err != nil {
				return err
			}
			out[id] = u
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("host usage: %w", err)
	}
	return out, nil
}

// ReleaseLease gives up holder's lease; see store.ClusterStore.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	at := s.db.Time(sqldb.Now())
	if _, err := s.db.Exec(ctx, `UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ? AND expires_at > ?`,
		at, name, holder, at); err != nil {
		return s.db.Err(fmt.Sprintf("release lease %q", name), err)
	}
	return nil
}
