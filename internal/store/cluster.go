package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// HostState is a registered sandbox host's standing in the platform
// (docs/ARCHITECTURE.md, "Many hosts").
type HostState string

// Host states. A draining host keeps its running sandboxes but takes no
// new ones; a lost host stopped heartbeating and its sandboxes were moved
// or failed. A host that registers again is active (or still draining)
// under a new generation.
const (
	HostActive   HostState = "active"
	HostDraining HostState = "draining"
	HostLost     HostState = "lost"
)

// HostRecord is one sandbox host (a `ptd serve --role=host`) as the
// control plane knows it.
type HostRecord struct {
	ID     string
	Region string
	// URL is where api processes reach the host's RPC service.
	URL   string
	State HostState
	// Generation increments at every registration. It is the fencing
	// token of the host's session: a heartbeat of an older generation is
	// refused, and marking a host lost names the generation it ends, so a
	// host that comes back after its sandboxes moved cannot go on as if
	// nothing happened.
	Generation int64
	// Capacity and Status are documents the host sends (its resources and
	// classes at registration; its load and sandboxes at each heartbeat).
	// The store keeps them as given.
	Capacity json.RawMessage
	Status   json.RawMessage
	// Reason says why the host is in its state (a drain's note, what
	// marked it lost).
	Reason         string
	RegisteredAt   time.Time
	HeartbeatAt    time.Time
	StateChangedAt time.Time
}

// Lease is a named duty one holder has until ExpiresAt: a loop that must
// run once across api processes (timers, the reconciler, …) or an api
// process's own liveness.
type Lease struct {
	Name   string
	Holder string
	// Generation increments whenever the lease changes hands: the holder's
	// fencing token.
	Generation int64
	ExpiresAt  time.Time
}

// ClusterStore keeps what several ptd processes share beyond sandboxes:
// registered hosts, leases and cross-process locks. Store embeds it.
type ClusterStore interface {
	// RegisterHost records a host joining (or joining again): URL,
	// Region and Capacity are written, HeartbeatAt and RegisteredAt set to
	// now, Generation incremented (1 for a new host) and the state set to
	// active unless the host is draining (a drain outlives restarts). It
	// returns the stored record.
	RegisterHost(ctx context.Context, h HostRecord) (HostRecord, error)
	// HeartbeatHost records a heartbeat of the host's generation gen with
	// its status document. ErrNotFound if the host is unknown; ErrConflict
	// if gen is not its current generation or the host is lost (it must
	// register again).
	HeartbeatHost(ctx context.Context, id string, gen int64, status json.RawMessage) (HostRecord, error)
	// GetHost returns ErrNotFound if absent.
	GetHost(ctx context.Context, id string) (HostRecord, error)
	// ListHosts returns every host, by ID.
	ListHosts(ctx context.Context) ([]HostRecord, error)
	// SetHostState moves the host to state with reason. With gen > 0 it
	// applies only to that generation (ErrConflict otherwise: the host
	// registered again meanwhile). A lost host can only be marked lost
	// again; it becomes active by registering. ErrNotFound if absent.
	SetHostState(ctx context.Context, id string, gen int64, state HostState, reason string) (HostRecord, error)
	// HostUsage sums the sandboxes in any of states by host_id.
	HostUsage(ctx context.Context, states ...sandbox.State) (map[string]Usage, error)

	// AcquireLease takes lease name for holder until now+ttl when it is
	// free, expired or already holder's (a renewal). Generation increments
	// when the holder changes. It returns the lease as stored and whether
	// holder holds it now.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, bool, error)
	// ReleaseLease gives up holder's lease (it expires now, keeping its
	// generation). Releasing a lease holder does not hold is a no-op.
	ReleaseLease(ctx context.Context, name, holder string) error
	// ListLeases returns the leases whose name starts with prefix, expired
	// ones included, by name.
	ListLeases(ctx context.Context, prefix string) ([]Lease, error)

	// LockKey takes a lock named key that excludes every other LockKey of
	// the same key, in this process and in every other process sharing
	// the store, until unlock is called. It waits while another holds it
	// (ctx bounds the wait). Hold it briefly: a check and the write that
	// follows (an org's quota and its create).
	LockKey(ctx context.Context, key string) (unlock func(), err error)

	// RecordKeyFingerprint records f (CreatedAt set to now) unless a
	// fingerprint named f.Name is recorded already, and returns the one
	// stored: f when this call recorded it, the earlier one otherwise.
	// Concurrent calls for one name all return the same record.
	RecordKeyFingerprint(ctx context.Context, f KeyFingerprint) (KeyFingerprint, error)
	// GetKeyFingerprint returns ErrNotFound if none is recorded as name.
	GetKeyFingerprint(ctx context.Context, name string) (KeyFingerprint, error)
}

// KeyFingerprint is what the store keeps of one of the platform's keys
// (docs/ARCHITECTURE.md, "Many hosts"): a one-way fingerprint of it, never
// the key, so a ptd sharing the store can tell whether the key in its data
// dir is the platform's while a dump of the store opens no secret.
type KeyFingerprint struct {
	// Name is which key: "secrets.key" or "preview.key".
	Name        string
	Fingerprint string
	// Origin is where the key lives: the data dir and machine of the ptd
	// that recorded it ("/var/lib/platinum on m1"), what an operator
	// copies it from.
	Origin    string
	CreatedAt time.Time
}
