// Package network gives every sandbox its own network namespace on a host
// bridge, and fences it in: a sandbox reaches the outside world (when egress
// is allowed) but never the host's own services, link-local addresses or
// another sandbox. The host (ptd) can always connect in to a sandbox over
// the bridge; that is how it talks to pt-agent.
//
// Namespaces, veths, addresses and routes are made in-process with netlink
// (a few milliseconds per sandbox instead of tens of `ip` invocations).
// The firewall is installed once per Setup through the iptables binary, in
// chains of our own named after the bridge, so several managers (tests) and
// other software's rules never collide.
package network

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"sync"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/syncs"
)

// Endpoint is one sandbox's place on the network.
type Endpoint struct {
	// ID is the sandbox ID the endpoint was attached for.
	ID string
	// NetNSPath is the named namespace (/run/netns/<prefix><hash>) to hand
	// to the OCI runtime as the sandbox's network namespace.
	NetNSPath string
	// Addr is the sandbox's address on eth0 (prefix length = Config.Subnet's).
	Addr netip.Addr
	// Gateway is the bridge's address: the sandbox's default route.
	Gateway netip.Addr
	// HostVeth is the host end of the veth pair, a port of the bridge.
	HostVeth string
}

// Manager owns one bridge, its firewall chains and its address pool. All
// methods are safe for concurrent use.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	gateway netip.Addr
	// maxPorts bounds the sandboxes on the bridge (maxBridgePorts; a
	// test's smaller one).
	maxPorts int

	idLocks syncs.KeyedMutex

	mu        sync.Mutex
	endpoints map[string]Endpoint   // by sandbox ID
	used      map[netip.Addr]string // address -> sandbox ID, including attaches in progress

	// dispatch mirrors the policy dispatch rules installed on the host:
	// sandbox address -> hash naming its policy chains. Setup reads it back,
	// so a start with the default policy costs no iptables call at all.
	polMu    sync.Mutex
	dispatch map[netip.Addr]string
}

// New validates cfg and returns a Manager. It changes nothing on the host:
// call Setup before Attach.
func New(cfg Config, logger *slog.Logger) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		cfg:       cfg,
		log:       logger.With("bridge", cfg.Bridge),
		gateway:   cfg.gateway(),
		maxPorts:  maxBridgePorts,
		endpoints: map[string]Endpoint{},
		used:      map[netip.Addr]string{},
		dispatch:  map[netip.Addr]string{},
	}, nil
}

// Endpoint returns the endpoint attached for id, if any.
func (m *Manager) Endpoint(id string) (Endpoint, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ep, ok := m.endpoints[id]
	return ep, ok
}

// Endpoints returns every attached endpoint sorted by ID, so a reconciler
// can detach the ones whose sandbox no longer exists.
func (m *Manager) Endpoints() []Endpoint {
	m.mu.Lock()
	out := make([]Endpoint, 0, len(m.endpoints))
	for _, ep := range m.endpoints {
		out = append(out, ep)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Gateway returns the bridge's address (the sandboxes' default route).
func (m *Manager) Gateway() netip.Addr { return m.gateway }

// names derives the short, stable names for id. Interface names are
// limited to 15 bytes, so we cannot use the sandbox ID itself; a hash of
// (bridge, id) keeps names unique across managers and lets Detach find
// leftovers of a crashed ptd without any state.
func (m *Manager) names(id string) (nsName, veth string) { return Names(m.cfg, id) }

// Names returns the network namespace (under /run/netns) and host veth
// names a Manager with cfg gives sandbox id, so a tool that checks a host
// for leftovers (bench/load) finds them by the same rule.
func Names(cfg Config, id string) (nsName, veth string) {
	sum := sha256.Sum256([]byte(cfg.Bridge + "\x00" + id))
	h := hex.EncodeToString(sum[:6])
	return cfg.NetNSPrefix + h, vethPrefix + h
}

const (
	// vethPrefix + 12 hex digits = 15 bytes, the interface name limit.
	vethPrefix = "ptv"
	// hashLen is the number of hex digits in the names' hash part.
	hashLen = 12
	// aliasPrefix tags the host veth's alias with the sandbox ID; Recover
	// reads it back because the hashed names cannot be reversed.
	aliasPrefix = "platinum:"
	// maxIDLen keeps aliasPrefix+id under IFALIASZ (256).
	maxIDLen = 200
)

func validID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("sandbox id %q: want 1..%d bytes: %w", id, maxIDLen, sandbox.ErrInvalidArgument)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < ' ' || id[i] == 0x7f {
			return fmt.Errorf("sandbox id %q: control character: %w", id, sandbox.ErrInvalidArgument)
		}
	}
	return nil
}

// maxBridgePorts is how many interfaces a Linux bridge takes: port numbers
// are 10 bits and 0 is reserved (the kernel's BR_MAX_PORTS), and the 1,024th
// veth fails with EXFULL. Every sandbox's host veth is one port, so a
// bridge holds at most this many sandboxes whatever the subnet's size.
const maxBridgePorts = 1<<10 - 1

// reserve picks the lowest free address in the pool and marks it used by id.
// The pool is the subnet's addresses, and no more than the bridge's ports.
func (m *Manager) reserve(id string) (netip.Addr, error) {
	last := lastAddr(m.cfg.Subnet)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.used) >= m.maxPorts {
		return netip.Addr{}, fmt.Errorf("bridge %s holds %d sandboxes, as many ports as a bridge has: %w",
			m.cfg.Bridge, len(m.used), sandbox.ErrUnavailable)
	}
	for a := m.gateway.Next(); a.IsValid() && a.Less(last); a = a.Next() {
		if _, taken := m.used[a]; !taken {
			m.used[a] = id
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("address pool %v exhausted: %w", m.cfg.Subnet, sandbox.ErrUnavailable)
}

// release frees addr if it is still held by id.
func (m *Manager) release(id string, addr netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used[addr] == id {
		delete(m.used, addr)
	}
}

// lastAddr returns the broadcast address of an IPv4 prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := 32 - p.Bits()
	for i := 3; i >= 0 && host > 0; i-- {
		n := min(host, 8)
		b[i] |= byte(1<<n - 1)
		host -= n
	}
	return netip.AddrFrom4(b)
}
