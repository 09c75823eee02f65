package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/checks"
	"github.com/platinum-dev/platinum/internal/store/internal/codec"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
)

// RegisterHost records a host joining in one statement: a new host is
// inserted at generation 1, a known one gets the next generation (the
// row lock of ON CONFLICT orders two registrations of one host); a
// draining host stays draining.
func (s *Store) RegisterHost(ctx context.Context, h store.HostRecord) (store.HostRecord, error) {
	at := now()
	out, err := dec.Host(s.pool.QueryRow(ctx, `INSERT INTO hosts (`+rowscan.HostCols+`) VALUES ($1, $2, $3, $4, 1, $5, '{}', '', $6, $6, $6)
		ON CONFLICT (id) DO UPDATE SET region = EXCLUDED.region, url = EXCLUDED.url, capacity = EXCLUDED.capacity,
			generation = hosts.generation + 1, registered_at = EXCLUDED.registered_at, heartbeat_at = EXCLUDED.heartbeat_at,
			state = CASE WHEN hosts.state = 'draining' THEN hosts.state ELSE EXCLUDED.state END,
			reason = CASE WHEN hosts.state = 'draining' THEN hosts.reason ELSE '' END,
			state_changed_at = CASE WHEN hosts.state = 'draining' THEN hosts.state_changed_at ELSE EXCLUDED.state_changed_at END
		RETURNING `+rowscan.HostCols, h.ID, h.Region, h.URL, string(store.HostActive), codec.Doc(h.Capacity), at))
	if err != nil {
		return store.HostRecord{}, wrap(fmt.Sprintf("register host %q", h.ID), err)
	}
	return out, nil
}

// HeartbeatHost records a heartbeat of generation gen; see
// store.ClusterStore.
func (s *Store) HeartbeatHost(ctx context.Context, id string, gen int64, status json.RawMessage) (store.HostRecord, error) {
	var out store.HostRecord
	err := s.tx(ctx, func(tx pgx.Tx) error {
		cur, err := getOne(tx.QueryRow(ctx, `SELECT `+rowscan.HostCols+` FROM hosts WHERE id = $1 FOR UPDATE`, id), dec.Host, "host", id)
		if err != nil {
			return err
		}
		if cur.Generation != gen || cur.State == store.HostLost {
			return fmt.Errorf("host %q: heartbeat of generation %d, host is %s at generation %d: %w", id, gen, cur.State, cur.Generation, store.ErrConflict)
		}
		out, err = dec.Host(tx.QueryRow(ctx, `UPDATE hosts SET status = $2, heartbeat_at = $3 WHERE id = $1 RETURNING `+rowscan.HostCols,
			id, codec.Doc(status), now()))
		return err
	})
	if err != nil {
		return store.HostRecord{}, wrap("heartbeat", err)
	}
	return out, nil
}

// SetHostState moves a host to state under its row lock; see
// store.ClusterStore.
func (s *Store) SetHostState(ctx context.Context, id string, gen int64, state store.HostState, reason string) (store.HostRecord, error) {
	var out store.HostRecord
	err := s.tx(ctx, func(tx pgx.Tx) error {
		cur, err := getOne(tx.QueryRow(ctx, `SELECT `+rowscan.HostCols+` FROM hosts WHERE id = $1 FOR UPDATE`, id), dec.Host, "host", id)
		if err != nil {
			return err
		}
		moved, err := checks.HostState(cur, gen, state)
		if err != nil {
			return err
		}
		changed := cur.StateChangedAt
		if moved {
			changed = now()
		}
		out, err = dec.Host(tx.QueryRow(ctx, `UPDATE hosts SET state = $2, reason = $3, state_changed_at = $4 WHERE id = $1 RETURNING `+rowscan.HostCols,
			id, string(state), reason, changed))
		return err
	})
	if err != nil {
		return store.HostRecord{}, wrap("set host state", err)
	}
	return out, nil
}

const leaseCols = `name, holder, generation, expires_at`

// AcquireLease takes or renews a lease in one statement: the upsert's
// row lock orders two contenders, and its WHERE lets through only a
// renewal (same holder, unexpired) or a takeover of an expired lease,
// which moves the generation.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, bool, error) {
	at := now()
	l, err := dec.Lease(s.pool.QueryRow(ctx, `INSERT INTO leases (`+leaseCols+`) VALUES ($1, $2, 1, $4)
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
			generation = CASE WHEN leases.holder = EXCLUDED.holder AND leases.expires_at > $3 THEN leases.generation ELSE leases.generation + 1 END
		WHERE (leases.holder = EXCLUDED.holder AND leases.expires_at > $3) OR leases.expires_at <= $3
		RETURNING `+leaseCols, name, holder, at, at.Add(ttl)))
	if err == nil {
		return l, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, false, wrap(fmt.Sprintf("lease %q", name), err)
	}
	// Held by another: report who.
	l, err = getOne(s.pool.QueryRow(ctx, `SELECT `+leaseCols+` FROM leases WHERE name = $1`, name), dec.Lease, "lease", name)
	if err != nil {
		return store.Lease{}, false, err
	}
	return l, false, nil
}

// ListLeases returns the leases whose name starts with prefix, by name.
func (s *Store) ListLeases(ctx context.Context, prefix string) ([]store.Lease, error) {
	out, err := queryAll(ctx, s.pool, dec.Lease, `SELECT `+leaseCols+` FROM leases WHERE left(name, $1) = $2 ORDER BY name`,
		len([]rune(prefix)), prefix)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out, nil
}

// LockKey takes a transaction-scoped advisory lock (lockKeyBase plus a hash
// of key) in a transaction of its own, held until unlock commits it. A
// transaction-scoped lock cannot outlive its holder unnoticed: if the
// connection dies the transaction aborts and the lock goes with it, as a
// session lock on a pooled connection could not promise.
func (s *Store) LockKey(ctx context.Context, key string) (func(), error) {
	h := fnv.New32a()
	h.Write([]byte(key))
	select {
	case s.keySlots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("lock %q: %w", key, ctx.Err())
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		<-s.keySlots
		return nil, fmt.Errorf("lock %q: %w", key, err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKeyBase|int64(h.Sum32())); err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		<-s.keySlots
		return nil, fmt.Errorf("lock %q: %w", key, err)
	}
	return func() {
		if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
			s.logger.Warn("unlock", "key", key, "err", err)
		}
		<-s.keySlots
	}, nil
}
