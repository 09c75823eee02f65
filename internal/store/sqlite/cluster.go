package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/checks"
	"github.com/platinum-dev/platinum/internal/store/internal/codec"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
)

// RegisterHost records a host joining; see store.ClusterStore.
func (s *Store) RegisterHost(ctx context.Context, h store.HostRecord) (store.HostRecord, error) {
	var out store.HostRecord
	err := s.write(ctx, func(tx *sql.Tx) error {
		at := sandbox.FormatTime(now())
		cur, err := dec.Host(tx.QueryRowContext(ctx, `SELECT `+rowscan.HostCols+` FROM hosts WHERE id = ?`, h.ID))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := tx.ExecContext(ctx, `INSERT INTO hosts (`+rowscan.HostCols+`) VALUES (?, ?, ?, ?, 1, ?, '{}', '', ?, ?, ?)`,
				h.ID, h.Region, h.URL, string(store.HostActive), codec.Doc(h.Capacity), at, at, at); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			state, changed, reason := store.HostActive, at, ""
			if cur.State == store.HostDraining {
				state, changed, reason = cur.State, sandbox.FormatTime(cur.StateChangedAt), cur.Reason
			}
			if _, err := tx.ExecContext(ctx, `UPDATE hosts SET region = ?, url = ?, state = ?, generation = generation + 1, capacity = ?,
				reason = ?, registered_at = ?, heartbeat_at = ?, state_changed_at = ? WHERE id = ?`,
				h.Region, h.URL, string(state), codec.Doc(h.Capacity), reason, at, at, changed, h.ID); err != nil {
				return err
			}
		}
		out, err = dec.Host(tx.QueryRowContext(ctx, `SELECT `+rowscan.HostCols+` FROM hosts WHERE id = ?`, h.ID))
		return err
	})
	if err != nil {
		return store.HostRecord{}, fmt.Errorf("register host %q: %w", h.ID, err)
	}
	return out, nil
}

// HeartbeatHost records a heartbeat of generation gen; see
// store.ClusterStore.
func (s *Store) HeartbeatHost(ctx context.Context, id string, gen int64, status json.RawMessage) (store.HostRecord, error) {
	return s.updateHost(ctx, id, "heartbeat", func(tx *sql.Tx, cur store.HostRecord) error {
		if cur.Generation != gen || cur.State == store.HostLost {
			return fmt.Errorf("host %q: heartbeat of generation %d, host is %s at generation %d: %w", id, gen, cur.State, cur.Generation, store.ErrConflict)
		}
		_, err := tx.ExecContext(ctx, `UPDATE hosts SET status = ?, heartbeat_at = ? WHERE id = ?`,
			codec.Doc(status), sandbox.FormatTime(now()), id)
		return err
	})
}

// SetHostState moves a host to state; see store.ClusterStore.
func (s *Store) SetHostState(ctx context.Context, id string, gen int64, state store.HostState, reason string) (store.HostRecord, error) {
	return s.updateHost(ctx, id, "set host state", func(tx *sql.Tx, cur store.HostRecord) error {
		moved, err := checks.HostState(cur, gen, state)
		if err != nil {
			return err
		}
		changed := sandbox.FormatTime(cur.StateChangedAt)
		if moved {
			changed = sandbox.FormatTime(now())
		}
		_, err = tx.ExecContext(ctx, `UPDATE hosts SET state = ?, reason = ?, state_changed_at = ? WHERE id = ?`,
			string(state), reason, changed, id)
		return err
	})
}

// updateHost runs write on host id's stored record in one write
// transaction and returns the record as written; what prefixes a failure.
func (s *Store) updateHost(ctx context.Context, id, what string, write func(tx *sql.Tx, cur store.HostRecord) error) (store.HostRecord, error) {
	var out store.HostRecord
	err := s.write(ctx, func(tx *sql.Tx) error {
		cur, err := getOne(tx.QueryRowContext(ctx, `SELECT `+rowscan.HostCols+` FROM hosts WHERE id = ?`, id), dec.Host, "host", id)
		if err != nil {
			return err
		}
		if err := write(tx, cur); err != nil {
			return err
		}
		out, err = dec.Host(tx.QueryRowContext(ctx, `SELECT `+rowscan.HostCols+` FROM hosts WHERE id = ?`, id))
		return err
	})
	if err != nil {
		return store.HostRecord{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

const leaseCols = `name, holder, generation, expires_at`

// AcquireLease takes or renews a lease; see store.ClusterStore.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, bool, error) {
	var out store.Lease
	held := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		at := now()
		exp := sandbox.FormatTime(at.Add(ttl))
		cur, err := dec.Lease(tx.QueryRowContext(ctx, `SELECT `+leaseCols+` FROM leases WHERE name = ?`, name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := tx.ExecContext(ctx, `INSERT INTO leases (`+leaseCols+`) VALUES (?, ?, 1, ?)`, name, holder, exp); err != nil {
				return err
			}
			held = true
		case err != nil:
			return err
		case cur.Holder == holder && cur.ExpiresAt.After(at):
			if _, err := tx.ExecContext(ctx, `UPDATE leases SET expires_at = ? WHERE name = ?`, exp, name); err != nil {
				return err
			}
			held = true
		case !cur.ExpiresAt.After(at):
			if _, err := tx.ExecContext(ctx, `UPDATE leases SET holder = ?, generation = generation + 1, expires_at = ? WHERE name = ?`,
				holder, exp, name); err != nil {
				return err
			}
			held = true
		}
		out, err = dec.Lease(tx.QueryRowContext(ctx, `SELECT `+leaseCols+` FROM leases WHERE name = ?`, name))
		return err
	})
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("lease %q: %w", name, err)
	}
	return out, held, nil
}

// ListLeases returns the leases whose name starts with prefix, by name.
func (s *Store) ListLeases(ctx context.Context, prefix string) ([]store.Lease, error) {
	out, err := queryAll(ctx, s.r, dec.Lease, `SELECT `+leaseCols+` FROM leases WHERE substr(name, 1, ?) = ? ORDER BY name`,
		len(prefix), prefix)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out, nil
}

// LockKey takes a lock named key. An SQLite store is one process's (the
// embedded default), so an in-process lock excludes everyone.
func (s *Store) LockKey(ctx context.Context, key string) (func(), error) {
	return s.keys.lock(ctx, key)
}

// keyLocks are LockKey's locks: one channel of capacity one per key held
// or waited for, so a wait can end with its ctx.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{}
	refs int
}

func (k *keyLocks) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	drop := func() {
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; drop() }, nil
	case <-ctx.Done():
		drop()
		return nil, fmt.Errorf("lock %q: %w", key, ctx.Err())
	}
}
