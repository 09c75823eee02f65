//go:build linux

package network

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/vishvananda/netlink"
)

// Adopt registers the endpoint of sandbox id at addr when its namespace
// and host veth exist but Recover could not read the address back: a
// running gVisor sandbox (runsc --network=sandbox) takes its addresses and
// routes out of the kernel's interface and serves them itself, so after a
// ptd restart only the caller's own record knows the address. Adopt checks
// what it can (namespace, veth on our bridge carrying id in its alias, addr
// in the pool and free) and then trusts addr. Call it before any Attach,
// like Recover. Adopting an endpoint that is already known returns it. It
// returns an error wrapping sandbox.ErrNotFound when the namespace or veth
// is missing and sandbox.ErrConflict when addr is outside the pool or held
// by another sandbox.
func (m *Manager) Adopt(ctx context.Context, id string, addr netip.Addr) (Endpoint, error) {
	return m.ensure(id, func() (Endpoint, error) {
		if !m.cfg.Subnet.Contains(addr) || addr == m.gateway || addr == lastAddr(m.cfg.Subnet) {
			return Endpoint{}, fmt.Errorf("adopt %s: address %v is not in the pool %v: %w", id, addr, m.cfg.Subnet, sandbox.ErrConflict)
		}
		nsName, veth := m.names(id)
		path := filepath.Join(netnsDir, nsName)
		if _, err := os.Stat(path); err != nil {
			return Endpoint{}, fmt.Errorf("adopt %s: namespace %s: %w", id, nsName, sandbox.ErrNotFound)
		}
		link, err := netlink.LinkByName(veth)
		if err != nil {
			return Endpoint{}, fmt.Errorf("adopt %s: host veth %s: %w", id, veth, sandbox.ErrNotFound)
		}
		br, err := netlink.LinkByName(m.cfg.Bridge)
		if err != nil {
			return Endpoint{}, fmt.Errorf("adopt %s: bridge %s: %w", id, m.cfg.Bridge, err)
		}
		if link.Attrs().MasterIndex != br.Attrs().Index {
			return Endpoint{}, fmt.Errorf("adopt %s: host veth %s is not on bridge %s: %w", id, veth, m.cfg.Bridge, sandbox.ErrConflict)
		}
		if got, _ := strings.CutPrefix(link.Attrs().Alias, aliasPrefix); got != id {
			return Endpoint{}, fmt.Errorf("adopt %s: host veth %s belongs to %q: %w", id, veth, got, sandbox.ErrConflict)
		}
		if err := ctx.Err(); err != nil {
			return Endpoint{}, err
		}
		noIPv6(veth)
		ep := Endpoint{ID: id, NetNSPath: path, Addr: addr, Gateway: m.gateway, HostVeth: veth}
		m.mu.Lock()
		defer m.mu.Unlock()
		if other, taken := m.used[addr]; taken && other != id {
			return Endpoint{}, fmt.Errorf("adopt %s: address %v is held by %s: %w", id, addr, other, sandbox.ErrConflict)
		}
		m.endpoints[id] = ep
		m.used[addr] = id
		m.log.Info("adopted endpoint", "sandbox_id", id, "addr", addr)
		return ep, nil
	})
}
