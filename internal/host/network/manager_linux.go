package network

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Setup makes the host ready for Attach. It is idempotent and safe to run
// on every ptd start: it creates the bridge (if missing) with the gateway
// address, installs or refreshes the firewall, enables forwarding when
// egress is allowed, and then runs Recover so endpoints that survived a
// restart keep their addresses.
//
// It returns an error wrapping sandbox.ErrConflict if another interface
// already holds an address inside the subnet.
func (m *Manager) Setup(ctx context.Context) error {
	if err := m.checkSubnetFree(); err != nil {
		return err
	}
	br, err := m.ensureBridge()
	if err != nil {
		return err
	}
	if m.cfg.Egress {
		if err := enableIPForward(); err != nil {
			return err
		}
	}
	if err := raiseNeighTable(neighDefaults); err != nil {
		m.log.Warn("neighbour table: could not raise its size; past about 1,000 sandboxes connections to them stall", "err", err)
	}
	if err := m.installFirewall(ctx); err != nil {
		return err
	}
	if err := m.loadDispatch(ctx); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return fmt.Errorf("bridge %s: up: %w", m.cfg.Bridge, err)
	}
	return m.Recover(ctx)
}

// checkSubnetFree refuses a subnet that overlaps an address on any other
// interface: routes would be ambiguous and the isolation rules, written for
// our bridge only, would not hold.
func (m *Manager) checkSubnetFree() error {
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	var brIndex int
	if br, err := netlink.LinkByName(m.cfg.Bridge); err == nil {
		brIndex = br.Attrs().Index
	}
	for _, a := range addrs {
		if a.LinkIndex == brIndex && brIndex != 0 {
			continue
		}
		p, ok := prefixOf(a.IPNet)
		if ok && p.Overlaps(m.cfg.Subnet) {
			return fmt.Errorf("subnet %v overlaps %v on interface index %d: %w", m.cfg.Subnet, p, a.LinkIndex, sandbox.ErrConflict)
		}
	}
	return nil
}

func (m *Manager) ensureBridge() (netlink.Link, error) {
	name := m.cfg.Bridge
	link, err := netlink.LinkByName(name)
	var nf netlink.LinkNotFoundError
	switch {
	case errors.As(err, &nf):
		attrs := netlink.NewLinkAttrs()
		attrs.Name = name
		// A fixed MAC: a bridge otherwise takes the lowest port MAC, and
		// changes it as sandboxes come and go, leaving stale ARP entries.
		attrs.HardwareAddr = stableMAC(name)
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("bridge %s: create: %w", name, err)
		}
		if link, err = netlink.LinkByName(name); err != nil {
			return nil, fmt.Errorf("bridge %s: %w", name, err)
		}
	case err != nil:
		return nil, fmt.Errorf("bridge %s: %w", name, err)
	}
	if link.Type() != "bridge" {
		return nil, fmt.Errorf("bridge %s: exists as a %s link: %w", name, link.Type(), sandbox.ErrConflict)
	}
	// The firewall is IPv4-only: with IPv6 off on the bridge the host has
	// no link-local address a sandbox could reach it by.
	if err := noIPv6(name); err != nil {
		return nil, fmt.Errorf("bridge %s: %w", name, err)
	}
	// Isolated ports do not pass ARP between sandboxes, so a connect to
	// another sandbox would wait for ARP and fail as "unreachable" seconds
	// later. With private-VLAN proxy ARP the host answers for them, the
	// packet is routed through it, and the firewall refuses it at once.
	for _, k := range []string{"proxy_arp_pvlan", "proxy_arp"} {
		if err := writeSysctl(filepath.Join("/proc/sys/net/ipv4/conf", name, k), "1"); err != nil {
			return nil, fmt.Errorf("bridge %s: %s: %w", name, k, err)
		}
	}
	// And it answers at once: by default each proxied reply waits up to
	// proxy_delay (80 jiffies, 320 ms at HZ=250) in a queue every
	// interface of the host shares (proxy_qlen, 64 long, past which
	// requests are dropped). Once in a full e2e run such a connect failed
	// as "unreachable" three ARP tries later.
	if err := writeSysctl(filepath.Join("/proc/sys/net/ipv4/neigh", name, "proxy_delay"), "0"); err != nil {
		return nil, fmt.Errorf("bridge %s: proxy_delay: %w", name, err)
	}
	gw := &netlink.Addr{IPNet: &net.IPNet{
		IP:   net.IP(m.gateway.AsSlice()),
		Mask: net.CIDRMask(m.cfg.Subnet.Bits(), 32),
	}}
	if err := netlink.AddrReplace(link, gw); err != nil {
		return nil, fmt.Errorf("bridge %s: address %v: %w", name, gw.IPNet, err)
	}
	return link, nil
}

// stableMAC derives a locally administered unicast MAC from the bridge name.
func stableMAC(name string) net.HardwareAddr {
	sum := sha256.Sum256([]byte("platinum-bridge\x00" + name))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&0xfe | 0x02
	return mac
}

// enableIPForward turns on IPv4 forwarding, which egress needs. It writes
// only when the value is 0 and never turns forwarding back off (not even in
// Teardown): the setting is host-wide and other software (container
// engines, VPNs) may rely on it; our FORWARD rules, not this switch, are
// what confine the sandboxes.
func enableIPForward() error {
	const p = "/proc/sys/net/ipv4/ip_forward"
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("ip_forward: %w", err)
	}
	if string(bytes.TrimSpace(b)) != "0" {
		return nil
	}
	if err := writeSysctl(p, "1"); err != nil {
		return fmt.Errorf("ip_forward: %w", err)
	}
	return nil
}

// neighDefaults holds the host's IPv4 neighbour (ARP) table sizes.
const neighDefaults = "/proc/sys/net/ipv4/neigh/default"

// neighTable is the size raiseNeighTable gives the neighbour table: every
// sandbox's address is an entry once ptd talks to it, and the kernel's
// default hard limit (gc_thresh3, 1,024 entries, host-wide) was reached at
// some 850 sandboxes beside other bridges' (dmesg "neighbor table
// overflow!"); past it new connections wait for garbage collection, and a
// create took seconds. Ordered as written: the hard limit first.
var neighTable = [...]struct {
	name  string
	value int
}{{"gc_thresh3", 16384}, {"gc_thresh2", 8192}, {"gc_thresh1", 2048}}

// raiseNeighTable raises the neighbour table's thresholds under dir to
// neighTable's, never lowering one (the setting is host-wide).
func raiseNeighTable(dir string) error {
	var errs []error
	for _, t := range neighTable {
		p := filepath.Join(dir, t.name)
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cur, err := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil && cur >= t.value {
			continue
		}
		if err := writeSysctl(p, strconv.Itoa(t.value)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// noIPv6 turns IPv6 off on a host link: the bridge, and each sandbox's
// veth (see attach; an endpoint made by an earlier ptd gets it when it is
// recovered or adopted). A kernel without IPv6 has nothing to turn off.
func noIPv6(link string) error {
	err := writeSysctl(filepath.Join("/proc/sys/net/ipv6/conf", link, "disable_ipv6"), "1")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func writeSysctl(path, value string) error {
	return os.WriteFile(path, []byte(value), 0)
}

// Recover registers endpoints that already exist on the host: namespaces
// under /run/netns with our prefix whose host veth is a port of our bridge.
// The sandbox ID comes from the veth's alias, the address from eth0 inside
// the namespace. Setup calls it; call it again only before any Attach.
// Namespaces it cannot account for are logged and left alone (they may
// belong to another manager sharing the prefix).
func (m *Manager) Recover(ctx context.Context) error {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	br, err := netlink.LinkByName(m.cfg.Bridge)
	if err != nil {
		return fmt.Errorf("recover: bridge %s: %w", m.cfg.Bridge, err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		h, ok := strings.CutPrefix(name, m.cfg.NetNSPrefix)
		if !ok || len(h) != hashLen {
			continue
		}
		ep, err := m.inspect(name, vethPrefix+h, br.Attrs().Index)
		if err != nil {
			m.log.Debug("recover: skipping netns", "netns", name, "err", err)
			continue
		}
		noIPv6(ep.HostVeth)
		m.mu.Lock()
		if _, known := m.endpoints[ep.ID]; !known {
			if other, taken := m.used[ep.Addr]; taken && other != ep.ID {
				m.log.Warn("recover: address already in use, skipping", "netns", name, "addr", ep.Addr, "holder", other)
			} else {
				m.endpoints[ep.ID] = ep
				m.used[ep.Addr] = ep.ID
				m.log.Info("recovered endpoint", "sandbox_id", ep.ID, "addr", ep.Addr)
			}
		}
		m.mu.Unlock()
	}
	return nil
}

// inspect reads an existing endpoint back from the host.
func (m *Manager) inspect(nsName, veth string, bridgeIndex int) (Endpoint, error) {
	link, err := netlink.LinkByName(veth)
	if err != nil {
		return Endpoint{}, fmt.Errorf("host veth %s: %w", veth, err)
	}
	if link.Attrs().MasterIndex != bridgeIndex {
		return Endpoint{}, fmt.Errorf("host veth %s: not on bridge %s", veth, m.cfg.Bridge)
	}
	id, ok := strings.CutPrefix(link.Attrs().Alias, aliasPrefix)
	if !ok || validID(id) != nil {
		return Endpoint{}, fmt.Errorf("host veth %s: no sandbox id in alias %q", veth, link.Attrs().Alias)
	}
	if wantNS, wantVeth := m.names(id); wantNS != nsName || wantVeth != veth {
		return Endpoint{}, fmt.Errorf("host veth %s: names do not match sandbox %q", veth, id)
	}
	path := filepath.Join(netnsDir, nsName)
	nsh, err := netns.GetFromPath(path)
	if err != nil {
		return Endpoint{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer nsh.Close()
	nh, eth0, err := nsHandleLink(nsh, nsName, "eth0")
	if err != nil {
		return Endpoint{}, err
	}
	defer nh.Close()
	// A ptd killed in the middle of Attach can leave an address on a link
	// that is still down or has no route: such an endpoint is not
	// recovered, so the next Attach rebuilds it from scratch.
	if link.Attrs().Flags&net.FlagUp == 0 || eth0.Attrs().Flags&net.FlagUp == 0 {
		return Endpoint{}, fmt.Errorf("%s: a link is down (half-made attach)", nsName)
	}
	routes, err := retryDump(func() ([]netlink.Route, error) { return nh.RouteList(eth0, netlink.FAMILY_V4) })
	if err != nil {
		return Endpoint{}, fmt.Errorf("routes in %s: %w", nsName, err)
	}
	hasDefault := false
	for _, r := range routes {
		isDefault := r.Dst == nil
		if r.Dst != nil {
			ones, _ := r.Dst.Mask.Size()
			isDefault = ones == 0
		}
		hasDefault = hasDefault || (isDefault && r.Gw != nil)
	}
	if !hasDefault {
		return Endpoint{}, fmt.Errorf("%s: no default route (half-made attach)", nsName)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return nh.AddrList(eth0, netlink.FAMILY_V4) })
	if err != nil {
		return Endpoint{}, fmt.Errorf("eth0 addresses in %s: %w", nsName, err)
	}
	for _, a := range addrs {
		p, ok := prefixOf(a.IPNet)
		if ok && m.cfg.Subnet.Contains(p.Addr()) && p.Addr() != m.gateway {
			return Endpoint{ID: id, NetNSPath: path, Addr: p.Addr(), Gateway: m.gateway, HostVeth: veth}, nil
		}
	}
	return Endpoint{}, fmt.Errorf("eth0 in %s: no address in %v", nsName, m.cfg.Subnet)
}

// Teardown removes the firewall chains and hooks, every endpoint this
// manager knows, and the bridge. It is for tests and uninstall; ptd leaves
// the network in place across restarts. Other bridges and chains are not
// touched, and ip_forward is left as it is.
func (m *Manager) Teardown(ctx context.Context) error {
	var errs []error
	if _, err := netlink.LinkByName(m.cfg.Bridge); err == nil {
		// Pick up endpoints a previous process left, so none outlive us.
		if err := m.Recover(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ep := range m.Endpoints() {
		if err := m.Detach(ctx, ep.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.removeFirewall(ctx); err != nil {
		errs = append(errs, err)
	}
	if link, err := netlink.LinkByName(m.cfg.Bridge); err == nil {
		if err := netlink.LinkDel(link); err != nil {
			errs = append(errs, fmt.Errorf("bridge %s: delete: %w", m.cfg.Bridge, err))
		}
	}
	return errors.Join(errs...)
}

// Attach gives sandbox id its network: a named namespace, a veth pair with
// the host end on the bridge (isolated) and the other end as eth0 inside,
// the lowest free address of the pool, a default route via the gateway and
// lo up. Attaching an id that is already attached returns its endpoint.
//
// It returns an error wrapping sandbox.ErrInvalidArgument for a bad id and
// sandbox.ErrUnavailable when the pool is exhausted. On failure nothing is
// left behind.
func (m *Manager) Attach(ctx context.Context, id string) (Endpoint, error) {
	return m.ensure(id, func() (Endpoint, error) {
		if err := ctx.Err(); err != nil {
			return Endpoint{}, err
		}
		addr, err := m.reserve(id)
		if err != nil {
			return Endpoint{}, fmt.Errorf("attach %s: %w", id, err)
		}
		ep, err := m.attach(id, addr)
		if err != nil {
			nsName, veth := m.names(id)
			if cerr := m.remove(nsName, veth); cerr != nil {
				m.log.Warn("attach: cleanup after failure", "sandbox_id", id, "err", cerr)
			}
			m.release(id, addr)
			return Endpoint{}, fmt.Errorf("attach %s: %w", id, err)
		}
		m.mu.Lock()
		m.endpoints[id] = ep
		m.mu.Unlock()
		return ep, nil
	})
}

// ensure is the start Attach and Adopt share: it checks id and, under the
// id's lock (so two calls for one sandbox never interleave), returns the
// endpoint id already has, or else the one fresh makes.
func (m *Manager) ensure(id string, fresh func() (Endpoint, error)) (Endpoint, error) {
	if err := validID(id); err != nil {
		return Endpoint{}, err
	}
	unlock := m.idLocks.Lock(id)
	defer unlock()
	if ep, ok := m.Endpoint(id); ok {
		return ep, nil
	}
	return fresh()
}

func (m *Manager) attach(id string, addr netip.Addr) (Endpoint, error) {
	nsName, veth := m.names(id)
	// Leftovers from a crash mid-attach (never recovered) would block the
	// names; they carry no state worth keeping.
	if err := m.remove(nsName, veth); err != nil {
		return Endpoint{}, err
	}
	br, err := netlink.LinkByName(m.cfg.Bridge)
	if err != nil {
		return Endpoint{}, fmt.Errorf("bridge %s: %w", m.cfg.Bridge, err)
	}
	nsh, err := createNamedNetns(nsName)
	if err != nil {
		return Endpoint{}, err
	}
	defer nsh.Close()

	attrs := netlink.NewLinkAttrs()
	attrs.Name = veth
	attrs.MasterIndex = br.Attrs().Index
	if err := netlink.LinkAdd(&netlink.Veth{
		LinkAttrs:        attrs,
		PeerName:         "eth0",
		PeerNamespace:    netlink.NsFd(int(nsh)),
		PeerHardwareAddr: macForAddr(addr),
	}); err != nil {
		return Endpoint{}, fmt.Errorf("veth %s: create: %w", veth, err)
	}
	host, err := netlink.LinkByName(veth)
	if err != nil {
		return Endpoint{}, fmt.Errorf("veth %s: %w", veth, err)
	}
	// The kernel ignores an alias given at creation; set it now.
	if err := netlink.LinkSetAlias(host, aliasPrefix+id); err != nil {
		return Endpoint{}, fmt.Errorf("veth %s: alias: %w", veth, err)
	}
	// No IPv6 on the host's end either (the bridge and the namespace have
	// none): with it the kernel sends the sandbox neighbour discovery and
	// MLD from a link-local address, and runsc (2026-09) deadlocks when an
	// IPv6 packet arrives while it checkpoints (its netstack's save holds
	// the stack's lock while waiting for the packet dispatcher, which needs
	// it): the stop and every later runsc call on the sandbox hang.
	if err := noIPv6(veth); err != nil {
		return Endpoint{}, fmt.Errorf("veth %s: %w", veth, err)
	}
	// Isolated ports can talk to the bridge (the host) but not to each
	// other: this is what stops sandbox-to-sandbox traffic at layer 2.
	if err := netlink.LinkSetIsolated(host, true); err != nil {
		return Endpoint{}, fmt.Errorf("veth %s: isolate: %w", veth, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return Endpoint{}, fmt.Errorf("veth %s: up: %w", veth, err)
	}

	nh, lo, err := nsHandleLink(nsh, nsName, "lo")
	if err != nil {
		return Endpoint{}, err
	}
	defer nh.Close()
	if err := nh.LinkSetUp(lo); err != nil {
		return Endpoint{}, fmt.Errorf("lo in %s: up: %w", nsName, err)
	}
	eth0, err := nsLink(nh, nsName, "eth0")
	if err != nil {
		return Endpoint{}, err
	}
	ipnet := &net.IPNet{IP: net.IP(addr.AsSlice()), Mask: net.CIDRMask(m.cfg.Subnet.Bits(), 32)}
	if err := nh.AddrAdd(eth0, &netlink.Addr{IPNet: ipnet}); err != nil {
		return Endpoint{}, fmt.Errorf("eth0 in %s: address %v: %w", nsName, ipnet, err)
	}
	if err := nh.LinkSetUp(eth0); err != nil {
		return Endpoint{}, fmt.Errorf("eth0 in %s: up: %w", nsName, err)
	}
	if err := nh.RouteAdd(&netlink.Route{
		LinkIndex: eth0.Attrs().Index,
		Gw:        net.IP(m.gateway.AsSlice()),
	}); err != nil {
		return Endpoint{}, fmt.Errorf("default route in %s: %w", nsName, err)
	}
	if err := m.pinNeighbours(nh, eth0, br, addr); err != nil {
		return Endpoint{}, fmt.Errorf("%s: %w", nsName, err)
	}
	// The host veth gets its carrier asynchronously (the kernel's linkwatch
	// work, which waits for the rtnl lock); until then it drops what it
	// sends, ARP replies included. Return an endpoint that works.
	m.waitOperUp(netlink.LinkByName, veth)
	return Endpoint{
		ID:        id,
		NetNSPath: filepath.Join(netnsDir, nsName),
		Addr:      addr,
		Gateway:   m.gateway,
		HostVeth:  veth,
	}, nil
}

// pinNeighbours gives the host a permanent neighbour (ARP) entry for the
// sandbox's address and the sandbox one for its gateway, so neither side
// ever asks ARP for the other: both MACs are fixed (macForAddr, and
// stableMAC for a bridge ptd made). A packet the host sent to the address
// while the sandbox's network stack was not yet answering (a closing
// connection of the sandbox that had the address before, say) left the
// host's entry incomplete, and the first request to the new sandbox then
// waited for the kernel's next ARP try, a second later: 1 in 100 to 200
// gVisor creates took 0.85 s more (docs/ARCHITECTURE.md, "Neighbours").
// And gVisor's network stack sends an ARP request of its own from a timer,
// which waits behind a booting guest: runsc copies the namespace's
// permanent entries into its stack, so it never needs one.
func (m *Manager) pinNeighbours(nh *netlink.Handle, eth0, br netlink.Link, addr netip.Addr) error {
	if err := netlink.NeighSet(permanentNeighbour(br, addr, macForAddr(addr))); err != nil {
		return fmt.Errorf("bridge %s: neighbour %v: %w", m.cfg.Bridge, addr, err)
	}
	// A bridge ptd did not make may take another port's MAC when ports
	// come and go; its sandboxes ask ARP for it, as before.
	if mac := br.Attrs().HardwareAddr; bytes.Equal(mac, stableMAC(m.cfg.Bridge)) {
		if err := nh.NeighSet(permanentNeighbour(eth0, m.gateway, mac)); err != nil {
			return fmt.Errorf("gateway neighbour: %w", err)
		}
	}
	return nil
}

// permanentNeighbour is the permanent IPv4 neighbour entry on link for
// addr at mac (pinNeighbours).
func permanentNeighbour(link netlink.Link, addr netip.Addr, mac net.HardwareAddr) *netlink.Neigh {
	return &netlink.Neigh{LinkIndex: link.Attrs().Index, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
		IP: net.IP(addr.AsSlice()), HardwareAddr: mac}
}

// nsHandleLink opens a netlink handle in the namespace nsh, named nsName
// in errors, and finds the link called name there: how Attach and Recover
// start on a sandbox's side. The caller closes the handle.
func nsHandleLink(nsh netns.NsHandle, nsName, name string) (*netlink.Handle, netlink.Link, error) {
	nh, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, nil, fmt.Errorf("netlink in %s: %w", nsName, err)
	}
	l, err := nsLink(nh, nsName, name)
	if err != nil {
		nh.Close()
		return nil, nil, err
	}
	return nh, l, nil
}

// nsLink is the link called name in nh's namespace nsName; its error
// says which link in which namespace is missing.
func nsLink(nh *netlink.Handle, nsName, name string) (netlink.Link, error) {
	l, err := nh.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", name, nsName, err)
	}
	return l, nil
}

// macForAddr derives a locally administered unicast MAC from a sandbox's
// address. Reusing an address then reuses its MAC, so ARP entries cached
// for a deleted sandbox stay correct for the next one: without this a new
// sandbox on a recycled address was unreachable for ~20 s (stale ARP).
func macForAddr(a netip.Addr) net.HardwareAddr {
	b := a.As4()
	return net.HardwareAddr{0x02, 0x70, b[0], b[1], b[2], b[3]}
}

// waitOperUp polls until link reports operstate up, for at most a few
// seconds; a link that is still down then is logged, not an error (it will
// come up, traffic is only delayed).
func (m *Manager) waitOperUp(byName func(string) (netlink.Link, error), name string) {
	delay := 200 * time.Microsecond
	deadline := time.Now().Add(3 * time.Second)
	for {
		l, err := byName(name)
		if err != nil || l.Attrs().OperState == netlink.OperUp {
			return
		}
		if time.Now().After(deadline) {
			m.log.Warn("link not up yet", "link", name, "operstate", l.Attrs().OperState.String())
			return
		}
		time.Sleep(delay)
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// Detach removes sandbox id's veth pair and namespace and frees its
// address. It is idempotent, and works from the id alone (the names are
// derived from it), so it also cleans up after a ptd that crashed
// mid-attach. A process still inside the namespace keeps it alive, but
// without any link.
func (m *Manager) Detach(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	unlock := m.idLocks.Lock(id)
	defer unlock()
	nsName, veth := m.names(id)
	ep, attached := m.Endpoint(id)
	if attached {
		if err := m.detachPolicy(ctx, ep.Addr); err != nil {
			return fmt.Errorf("detach %s: %w", id, err)
		}
	}
	if err := m.remove(nsName, veth); err != nil {
		return fmt.Errorf("detach %s: %w", id, err)
	}
	if attached {
		// pinNeighbours' entry would outlive the sandbox (a permanent
		// entry is never collected), and a connect to a free address
		// should fail as unreachable, not wait for an answer.
		if br, err := netlink.LinkByName(m.cfg.Bridge); err == nil {
			if err := netlink.NeighDel(permanentNeighbour(br, ep.Addr, nil)); err != nil && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("detach %s: bridge neighbour: %w", id, err)
			}
		}
	}
	m.mu.Lock()
	if ep, ok := m.endpoints[id]; ok {
		delete(m.endpoints, id)
		if m.used[ep.Addr] == id {
			delete(m.used, ep.Addr)
		}
	}
	m.mu.Unlock()
	return nil
}

// remove deletes the host veth (which takes its peer with it) and the
// named namespace; missing ones are fine.
func (m *Manager) remove(nsName, veth string) error {
	link, err := netlink.LinkByName(veth)
	var nf netlink.LinkNotFoundError
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return fmt.Errorf("veth %s: %w", veth, err)
	default:
		if err := netlink.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("veth %s: delete: %w", veth, err)
		}
	}
	return removeNamedNetns(nsName)
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

// retryDump repeats a netlink dump that the kernel interrupted because the
// table changed under it (common while other sandboxes attach).
func retryDump[T any](f func() (T, error)) (T, error) {
	var v T
	var err error
	for range 10 {
		v, err = f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}
