package network

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/testenv"
)

// blockedDial is how long a dial that must fail is given. Dropped packets
// make it time out; it is not a performance assertion.
const blockedDial = 700 * time.Millisecond

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:n]
}

var subnets struct {
	sync.Mutex
	used map[int]bool
}

// pickSubnet returns a random 100.127.x.0/24 that no interface on the host
// uses and no other test in this process holds.
func pickSubnet(t *testing.T) netip.Prefix {
	t.Helper()
	subnets.Lock()
	defer subnets.Unlock()
	if subnets.used == nil {
		subnets.used = map[int]bool{}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		b := make([]byte, 1)
		rand.Read(b)
		x := int(b[0])
		if x >= 250 || subnets.used[x] {
			continue
		}
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 127, byte(x), 0}), 24)
		clash := false
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if hp, ok := prefixOf(n); ok && hp.Overlaps(p) {
					clash = true
				}
			}
		}
		if !clash {
			subnets.used[x] = true
			return p
		}
	}
	t.Fatal("no free 100.127.x.0/24")
	return netip.Prefix{}
}

func testConfig(t *testing.T, egress bool) Config {
	r := randHex(t, 6)
	return Config{
		Bridge:      "ptt" + r,
		Subnet:      pickSubnet(t),
		NetNSPrefix: "ptt" + r + "-",
		Egress:      egress,
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// newTestManager sets up a manager on a fresh bridge and tears everything
// down (endpoints, chains, hooks, bridge) when the test ends, then checks
// that nothing is left.
func newTestManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "iptables", "iptables-restore")
	m, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Teardown(context.Background()); err != nil {
			t.Errorf("Teardown: %v", err)
		}
		assertGone(t, cfg)
	})
	if err := m.Setup(context.Background()); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	return m
}

// newEgressManager is newTestManager on a fresh config that allows
// egress, the setup most tests here share; it returns both.
func newEgressManager(t *testing.T) (Config, *Manager) {
	t.Helper()
	cfg := testConfig(t, true)
	return cfg, newTestManager(t, cfg)
}

// attachNew attaches a new sandbox ID, sbx_<name>_<random>, to m.
func attachNew(t *testing.T, m *Manager, name string) Endpoint {
	t.Helper()
	ep, err := m.Attach(context.Background(), "sbx_"+name+"_"+randHex(t, 8))
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// assertGone checks that nothing named after cfg remains on the host.
func assertGone(t *testing.T, cfg Config) {
	t.Helper()
	if _, err := netlink.LinkByName(cfg.Bridge); err == nil {
		t.Errorf("bridge %s still exists", cfg.Bridge)
	}
	for _, table := range []string{"filter", "nat"} {
		out, err := exec.Command("iptables", "-w", "-t", table, "-S").CombinedOutput()
		if err != nil {
			t.Errorf("iptables -S: %v: %s", err, out)
		}
		if strings.Contains(string(out), "PT-"+cfg.Bridge) {
			t.Errorf("%s table still mentions PT-%s:\n%s", table, cfg.Bridge, out)
		}
	}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), cfg.NetNSPrefix) {
			t.Errorf("netns %s still exists", e.Name())
		}
	}
}

// inNetns runs f on an OS thread inside the namespace at path. Sockets f
// creates stay in that namespace afterwards.
func inNetns(t *testing.T, path string, f func() error) error {
	t.Helper()
	return onNetnsThread(func() error {
		target, err := netns.GetFromPath(path)
		if err != nil {
			return err
		}
		defer target.Close()
		return netns.Set(target)
	}, f)
}

// serve answers every connection on l with "hello <remote ip>\n" so a
// client can tell it reached this listener and from which address.
func serve(t *testing.T, l net.Listener) {
	t.Helper()
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Fprintf(c, "hello %s\n", host)
			c.Close()
		}
	}()
}

func listen(t *testing.T, nsPath, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	f := func() (err error) {
		l, err = net.Listen("tcp4", addr)
		return err
	}
	var err error
	if nsPath == "" {
		err = f()
	} else {
		err = inNetns(t, nsPath, f)
	}
	if err != nil {
		t.Fatalf("listen %s in %q: %v", addr, nsPath, err)
	}
	serve(t, l)
	return l
}

// dial connects from the namespace at nsPath ("" = host) and returns the
// greeting.
func dial(t *testing.T, nsPath, addr string, timeout time.Duration) (string, error) {
	t.Helper()
	var msg string
	f := func() error {
		c, err := net.DialTimeout("tcp4", addr, timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		msg = strings.TrimSpace(string(b))
		return err
	}
	if nsPath == "" {
		return msg, f()
	}
	return msg, inNetns(t, nsPath, f)
}

func portOf(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

func TestIsolation(t *testing.T) {
	t.Parallel()
	cfg, m := newEgressManager(t)
	ctx := context.Background()
	idA, idB := "sbx_a_"+randHex(t, 8), "sbx_b_"+randHex(t, 8)
	a, err := m.Attach(ctx, idA)
	if err != nil {
		t.Fatalf("Attach A: %v", err)
	}
	b, err := m.Attach(ctx, idB)
	if err != nil {
		t.Fatalf("Attach B: %v", err)
	}
	gw := cfg.Subnet.Addr().Next()
	if a.Gateway != gw || a.Addr != gw.Next() || b.Addr != gw.Next().Next() {
		t.Fatalf("endpoints %+v, %+v: want gateway %v and the next two addresses", a, b, gw)
	}

	lA := listen(t, a.NetNSPath, "0.0.0.0:0")
	lB := listen(t, b.NetNSPath, "0.0.0.0:0")
	lGw := listen(t, "", net.JoinHostPort(gw.String(), "0"))
	lAny := listen(t, "", "0.0.0.0:0")

	t.Run("host reaches sandbox", func(t *testing.T) {
		msg, err := dial(t, "", fmt.Sprintf("%s:%d", a.Addr, portOf(lA)), 5*time.Second)
		if err != nil {
			t.Fatalf("host -> A: %v", err)
		}
		if want := "hello " + gw.String(); msg != want {
			t.Errorf("A saw %q, want %q", msg, want)
		}
	})
	t.Run("host listeners work from the host", func(t *testing.T) {
		// Controls for the blocked cases below: the listeners are up.
		for _, addr := range []string{
			fmt.Sprintf("%s:%d", gw, portOf(lGw)),
			fmt.Sprintf("%s:%d", gw, portOf(lAny)),
		} {
			if _, err := dial(t, "", addr, 5*time.Second); err != nil {
				t.Errorf("host -> %s: %v", addr, err)
			}
		}
	})
	t.Run("sandbox reaches its own loopback", func(t *testing.T) {
		if _, err := dial(t, a.NetNSPath, fmt.Sprintf("127.0.0.1:%d", portOf(lA)), 5*time.Second); err != nil {
			t.Fatalf("A -> own listener on lo: %v", err)
		}
	})
	blocked := []struct {
		name string
		addr string
	}{
		{"sandbox to sandbox", fmt.Sprintf("%s:%d", b.Addr, portOf(lB))},
		{"sandbox to host on gateway address", fmt.Sprintf("%s:%d", gw, portOf(lGw))},
		{"sandbox to host wildcard listener", fmt.Sprintf("%s:%d", gw, portOf(lAny))},
	}
	for _, tt := range blocked {
		t.Run(tt.name, func(t *testing.T) {
			// Refused at once, not left to time out or to ARP.
			if msg, err := dial(t, a.NetNSPath, tt.addr, blockedDial); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("A -> %s: %q, %v; want the connection refused", tt.addr, msg, err)
			}
		})
	}
	t.Run("sandbox to sandbox routed via gateway", func(t *testing.T) {
		// A hostile sandbox may route its neighbour through the gateway;
		// the FORWARD rules must stop what port isolation does not see.
		err := inNetns(t, a.NetNSPath, func() error {
			eth0, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			return netlink.RouteAdd(&netlink.Route{
				LinkIndex: eth0.Attrs().Index,
				Dst:       &net.IPNet{IP: net.IP(b.Addr.AsSlice()), Mask: net.CIDRMask(32, 32)},
				Gw:        net.IP(gw.AsSlice()),
			})
		})
		if err != nil {
			t.Fatalf("route in A: %v", err)
		}
		addr := fmt.Sprintf("%s:%d", b.Addr, portOf(lB))
		if msg, err := dial(t, a.NetNSPath, addr, blockedDial); err == nil {
			t.Fatalf("A -> %s via gateway succeeded (%q), want it blocked", addr, msg)
		}
	})
	t.Run("bridge answers ARP for the others at once", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join("/proc/sys/net/ipv4/neigh", cfg.Bridge, "proxy_delay"))
		if err != nil || strings.TrimSpace(string(b)) != "0" {
			t.Errorf("proxy_delay = %q (%v), want 0", b, err)
		}
	})
	t.Run("bridge ports isolated", func(t *testing.T) {
		for _, ep := range []Endpoint{a, b} {
			link, err := netlink.LinkByName(ep.HostVeth)
			if err != nil {
				t.Fatal(err)
			}
			pi, err := netlink.LinkGetProtinfo(link)
			if err != nil {
				t.Fatal(err)
			}
			if !pi.Isolated {
				t.Errorf("%s is not isolated", ep.HostVeth)
			}
		}
	})
	t.Run("no IPv6 on bridge", func(t *testing.T) {
		br, err := netlink.LinkByName(cfg.Bridge)
		if err != nil {
			t.Fatal(err)
		}
		addrs, err := netlink.AddrList(br, netlink.FAMILY_V6)
		if err != nil {
			t.Fatal(err)
		}
		if len(addrs) != 0 {
			t.Errorf("bridge has IPv6 addresses %v; sandboxes could reach the host over them", addrs)
		}
	})
}

func TestAttachDetach(t *testing.T) {
	t.Parallel()
	_, m := newEgressManager(t)
	ctx := context.Background()
	ids := []string{"sbx_1_" + randHex(t, 8), "sbx_2_" + randHex(t, 8), "sbx_3_" + randHex(t, 8)}
	eps := map[string]Endpoint{}
	for _, id := range ids {
		ep, err := m.Attach(ctx, id)
		if err != nil {
			t.Fatalf("Attach %s: %v", id, err)
		}
		eps[id] = ep
	}
	again, err := m.Attach(ctx, ids[0])
	if err != nil {
		t.Fatalf("second Attach: %v", err)
	}
	if diff := cmp.Diff(eps[ids[0]], again, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("second Attach returned a different endpoint (-first +second):\n%s", diff)
	}
	if got, ok := m.Endpoint(ids[1]); !ok || got != eps[ids[1]] {
		t.Errorf("Endpoint(%s) = %+v, %v", ids[1], got, ok)
	}
	// The host's end sends the sandbox no IPv6 (a packet arriving during a
	// gVisor checkpoint deadlocks it).
	for _, ep := range eps {
		b, err := os.ReadFile(filepath.Join("/proc/sys/net/ipv6/conf", ep.HostVeth, "disable_ipv6"))
		if err != nil || strings.TrimSpace(string(b)) != "1" {
			t.Errorf("veth %s: disable_ipv6 = %q, %v; want 1", ep.HostVeth, b, err)
		}
	}

	// Neither side asks ARP for the other (pinNeighbours).
	for _, ep := range eps {
		if got := bridgeNeighbour(t, m, ep.Addr); got == nil || got.State != netlink.NUD_PERMANENT || got.HardwareAddr.String() != macForAddr(ep.Addr).String() {
			t.Errorf("bridge neighbour of %v = %+v, want permanent at %v", ep.Addr, got, macForAddr(ep.Addr))
		}
		if got := sandboxNeighbour(t, ep, ep.Gateway); got == nil || got.State != netlink.NUD_PERMANENT || got.HardwareAddr.String() != stableMAC(m.cfg.Bridge).String() {
			t.Errorf("%s: gateway neighbour = %+v, want permanent at %v", ep.ID, got, stableMAC(m.cfg.Bridge))
		}
	}

	mid := eps[ids[1]]
	for range 2 { // idempotent
		if err := m.Detach(ctx, ids[1]); err != nil {
			t.Fatalf("Detach: %v", err)
		}
	}
	if _, err := os.Stat(mid.NetNSPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("netns %s after Detach: stat = %v, want not exist", mid.NetNSPath, err)
	}
	if _, err := netlink.LinkByName(mid.HostVeth); err == nil {
		t.Errorf("veth %s still exists after Detach", mid.HostVeth)
	}
	if _, ok := m.Endpoint(ids[1]); ok {
		t.Errorf("Endpoint(%s) still known after Detach", ids[1])
	}
	if got := bridgeNeighbour(t, m, mid.Addr); got != nil {
		t.Errorf("bridge neighbour of %v after Detach = %+v, want none", mid.Addr, got)
	}
	if err := m.Detach(ctx, "sbx_never_attached"); err != nil {
		t.Errorf("Detach of unknown id: %v", err)
	}

	reuse, err := m.Attach(ctx, "sbx_4_"+randHex(t, 8))
	if err != nil {
		t.Fatalf("Attach after Detach: %v", err)
	}
	if reuse.Addr != mid.Addr {
		t.Errorf("Attach after Detach got %v, want the freed lowest address %v", reuse.Addr, mid.Addr)
	}
}

// bridgeNeighbour is m's bridge's neighbour entry for addr, or nil.
func bridgeNeighbour(t *testing.T, m *Manager, addr netip.Addr) *netlink.Neigh {
	t.Helper()
	br, err := netlink.LinkByName(m.cfg.Bridge)
	if err != nil {
		t.Fatal(err)
	}
	return findNeighbour(t, netlink.NeighList, br.Attrs().Index, addr)
}

// sandboxNeighbour is the neighbour entry for addr on eth0 in ep's
// namespace, or nil.
func sandboxNeighbour(t *testing.T, ep Endpoint, addr netip.Addr) *netlink.Neigh {
	t.Helper()
	nsh, err := netns.GetFromPath(ep.NetNSPath)
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	nh, eth0, err := nsHandleLink(nsh, ep.NetNSPath, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	return findNeighbour(t, nh.NeighList, eth0.Attrs().Index, addr)
}

func findNeighbour(t *testing.T, list func(int, int) ([]netlink.Neigh, error), link int, addr netip.Addr) *netlink.Neigh {
	t.Helper()
	ns, err := list(link, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == addr {
			return &n
		}
	}
	return nil
}

func TestConcurrentAttach(t *testing.T) {
	t.Parallel()
	cfg, m := newEgressManager(t)
	ctx := context.Background()
	const n = 12
	prefix := "sbx_c_" + randHex(t, 6) + "_"
	var wg sync.WaitGroup
	eps := make([]Endpoint, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { eps[i], errs[i] = m.Attach(ctx, fmt.Sprint(prefix, i)) })
	}
	wg.Wait()
	seen := map[netip.Addr]string{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Attach %d: %v", i, errs[i])
		}
		if other, dup := seen[eps[i].Addr]; dup {
			t.Errorf("%s and %s both got %v", other, eps[i].ID, eps[i].Addr)
		}
		seen[eps[i].Addr] = eps[i].ID
		if !cfg.Subnet.Contains(eps[i].Addr) {
			t.Errorf("%v outside %v", eps[i].Addr, cfg.Subnet)
		}
		if _, err := os.Stat(eps[i].NetNSPath); err != nil {
			t.Errorf("netns of %s: %v", eps[i].ID, err)
		}
	}
	if got := len(m.Endpoints()); got != n {
		t.Errorf("Endpoints() has %d entries, want %d", got, n)
	}
	// Concurrent detaches, too.
	for i := range n {
		wg.Go(func() { errs[i] = m.Detach(ctx, fmt.Sprint(prefix, i)) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Detach %d: %v", i, errs[i])
		}
	}
	if got := len(m.Endpoints()); got != 0 {
		t.Errorf("Endpoints() has %d entries after detaching all", got)
	}
}

func TestRecover(t *testing.T) {
	t.Parallel()
	cfg, m1 := newEgressManager(t)
	ctx := context.Background()
	x := attachNew(t, m1, "x")
	y := attachNew(t, m1, "y")
	if err := m1.Detach(ctx, x.ID); err != nil { // leave a hole below y
		t.Fatal(err)
	}

	// A restarted ptd: a new manager, same config.
	m2, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Setup(ctx); err != nil {
		t.Fatalf("Setup of second manager: %v", err)
	}
	if diff := cmp.Diff([]Endpoint{y}, m2.Endpoints(), cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Fatalf("recovered endpoints (-want +got):\n%s", diff)
	}
	z := attachNew(t, m2, "z")
	w := attachNew(t, m2, "w")
	if z.Addr != x.Addr || w.Addr == y.Addr {
		t.Errorf("after recovery got %v and %v; want the hole %v first and never %v", z.Addr, w.Addr, x.Addr, y.Addr)
	}
	// The recovered endpoint still works.
	l := listen(t, y.NetNSPath, "0.0.0.0:0")
	if _, err := dial(t, "", fmt.Sprintf("%s:%d", y.Addr, portOf(l)), 5*time.Second); err != nil {
		t.Errorf("host -> recovered sandbox: %v", err)
	}
	// Teardown through a manager that only recovered must remove everything
	// (newTestManager's cleanup checks).
	if err := m2.Teardown(ctx); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	assertGone(t, cfg)
}

func TestSetupRefusesOverlappingSubnet(t *testing.T) {
	t.Parallel()
	cfg, _ := newEgressManager(t)
	other := testConfig(t, true)
	other.Subnet = cfg.Subnet
	m, err := New(other, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Teardown(context.Background()); assertGone(t, other) })
	if err := m.Setup(context.Background()); err == nil {
		t.Fatal("Setup with a subnet already on another bridge succeeded")
	}
}

// outsideHost makes a namespace standing in for the internet: a veth from
// the host (not on the bridge) with a /30, and a listener inside. It returns
// the listener's address and the host end's address.
func outsideHost(t *testing.T) (target string, hostSide netip.Addr) {
	t.Helper()
	p := pickSubnet(t)
	hostAddr := p.Addr().Next()
	outAddr := hostAddr.Next()
	r := randHex(t, 6)
	nsName, veth := "ptt-out-"+r, "ptto"+r
	nsh, err := createNamedNetns(nsName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(veth); err == nil {
			netlink.LinkDel(l)
		}
		if err := removeNamedNetns(nsName); err != nil {
			t.Error(err)
		}
	})
	defer nsh.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = veth
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(nsh))}); err != nil {
		t.Fatal(err)
	}
	host, err := netlink.LinkByName(veth)
	if err != nil {
		t.Fatal(err)
	}
	mask := net.CIDRMask(30, 32)
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(hostAddr.AsSlice()), Mask: mask}}); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		t.Fatal(err)
	}
	nh, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	eth0, err := nh.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if err := nh.AddrAdd(eth0, &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(outAddr.AsSlice()), Mask: mask}}); err != nil {
		t.Fatal(err)
	}
	if err := nh.LinkSetUp(eth0); err != nil {
		t.Fatal(err)
	}
	// No route back to the sandbox subnet: replies only work through NAT.
	l := listen(t, "/run/netns/"+nsName, "0.0.0.0:0")
	return fmt.Sprintf("%s:%d", outAddr, portOf(l)), hostAddr
}

func TestEgress(t *testing.T) {
	t.Parallel()
	for _, egress := range []bool{true, false} {
		t.Run(fmt.Sprintf("egress=%v", egress), func(t *testing.T) {
			cfg := testConfig(t, egress)
			m := newTestManager(t, cfg)
			target, hostSide := outsideHost(t)
			ep, err := m.Attach(context.Background(), "sbx_e_"+randHex(t, 8))
			if err != nil {
				t.Fatal(err)
			}
			// Control: the outside host is up (reached from the host itself).
			if _, err := dial(t, "", target, 5*time.Second); err != nil {
				t.Fatalf("host -> outside: %v", err)
			}
			timeout := blockedDial
			if egress {
				timeout = 5 * time.Second
			}
			msg, err := dial(t, ep.NetNSPath, target, timeout)
			if egress {
				if err != nil {
					t.Fatalf("sandbox -> outside with egress: %v", err)
				}
				if want := "hello " + hostSide.String(); msg != want {
					t.Errorf("outside saw %q, want %q (masqueraded)", msg, want)
				}
			} else if err == nil {
				t.Fatalf("sandbox -> outside without egress succeeded (%q)", msg)
			}
			// The host's own address on that link is a host address: never.
			l := listen(t, "", net.JoinHostPort(hostSide.String(), "0"))
			if msg, err := dial(t, ep.NetNSPath, fmt.Sprintf("%s:%d", hostSide, portOf(l)), blockedDial); err == nil {
				t.Errorf("sandbox -> host address %v succeeded (%q)", hostSide, msg)
			}
		})
	}
}

func TestSetupIdempotent(t *testing.T) {
	t.Parallel()
	cfg, m := newEgressManager(t)
	ctx := context.Background()
	if err := m.Setup(ctx); err != nil {
		t.Fatalf("second Setup: %v", err)
	}
	for _, table := range []string{"filter", "nat"} {
		out, err := exec.Command("iptables", "-w", "-t", table, "-S").CombinedOutput()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "-A INPUT") || strings.HasPrefix(line, "-A FORWARD") || strings.HasPrefix(line, "-A POSTROUTING") || strings.HasPrefix(line, "-A PREROUTING") {
				if strings.Contains(line, "PT-"+cfg.Bridge+"-") {
					t.Logf("%s", line)
				}
			}
		}
		hooks := 0
		for _, h := range m.hooks() {
			if h.table == table {
				hooks++
			}
		}
		got := 0 // jumps from built-in chains (ours also jump between each other)
		for _, line := range strings.Split(string(out), "\n") {
			for _, b := range []string{"INPUT", "FORWARD", "POSTROUTING", "PREROUTING"} {
				if strings.HasPrefix(line, "-A "+b+" ") && strings.Contains(line, "-j PT-"+cfg.Bridge+"-") {
					got++
				}
			}
		}
		if got != hooks {
			t.Errorf("%s: %d jumps into our chains after two Setups, want %d", table, got, hooks)
		}
	}
}

func BenchmarkAttachDetach(b *testing.B) {
	testenv.RequiresRoot(b)
	r := make([]byte, 3)
	rand.Read(r)
	cfg := Config{Bridge: "pttb" + hex.EncodeToString(r), Subnet: netip.MustParsePrefix("100.127.251.0/24"), NetNSPrefix: "pttb" + hex.EncodeToString(r) + "-", Egress: true}
	m, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Cleanup(func() {
		if err := m.Teardown(ctx); err != nil {
			b.Error(err)
		}
	})
	if err := m.Setup(ctx); err != nil {
		b.Fatal(err)
	}
	var attach, detach time.Duration
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprint("sbx_bench_", i)
		t0 := time.Now()
		if _, err := m.Attach(ctx, id); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := m.Detach(ctx, id); err != nil {
			b.Fatal(err)
		}
		attach += t1.Sub(t0)
		detach += time.Since(t1)
	}
	b.ReportMetric(float64(attach.Microseconds())/float64(b.N)/1000, "attach-ms/op")
	b.ReportMetric(float64(detach.Microseconds())/float64(b.N)/1000, "detach-ms/op")
}

// TestRemoveUnknownKeepsOtherBridges: two managers on one host share the
// namespace prefix (two ptd with the default "pt-"); a sweep removes
// what a crash left on its own bridge and never another manager's
// sandboxes.
func TestRemoveUnknownKeepsOtherBridges(t *testing.T) {
	t.Parallel()
	cfgA, cfgB := testConfig(t, false), testConfig(t, false)
	cfgB.NetNSPrefix = cfgA.NetNSPrefix
	a, b := newTestManager(t, cfgA), newTestManager(t, cfgB)
	ctx := context.Background()
	idA := "sbx_a_" + randHex(t, 8)
	epA, err := a.Attach(ctx, idA)
	if err != nil {
		t.Fatal(err)
	}
	// Before either teardown, whose checks look for the shared prefix.
	t.Cleanup(func() { a.Detach(ctx, idA) })
	epB := attachNew(t, b, "b")
	// A manager on b's bridge that holds no endpoint: b's sandbox is what
	// a crash left there.
	fresh, err := New(cfgB, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	removed, err := fresh.RemoveUnknown(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Base(epB.NetNSPath)}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v (only the namespace on this bridge)", removed, want)
	}
	if _, err := os.Stat(epA.NetNSPath); err != nil {
		t.Errorf("the other bridge's sandbox lost its namespace: %v", err)
	}
	if _, err := netlink.LinkByName(epA.HostVeth); err != nil {
		t.Errorf("the other bridge's sandbox lost its veth: %v", err)
	}
	if _, err := os.Stat(epB.NetNSPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("this bridge's leftover namespace: stat = %v, want gone", err)
	}
}

// TestRemoveUnknownKeepsAttachInProgress: a namespace whose sandbox has
// reserved its address but has no endpoint yet (its attach is under way)
// is not the sweep's, even when nothing else of the sandbox is known; once
// the reservation is released it is.
func TestRemoveUnknownKeepsAttachInProgress(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, false)
	m := newTestManager(t, cfg)
	ctx := context.Background()
	ep := attachNew(t, m, "p")
	// A manager that lost the endpoint (as during an attach, before it
	// is recorded) but holds the address reservation.
	fresh, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	fresh.used[ep.Addr] = ep.ID
	if removed, err := fresh.RemoveUnknown(ctx, nil); err != nil || len(removed) != 0 {
		t.Fatalf("RemoveUnknown with the attach's address reserved = %v, %v; want nothing removed", removed, err)
	}
	if _, err := os.Stat(ep.NetNSPath); err != nil {
		t.Fatalf("the namespace of the attach under way is gone: %v", err)
	}
	fresh.release(ep.ID, ep.Addr)
	removed, err := fresh.RemoveUnknown(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Base(ep.NetNSPath)}; !slices.Equal(removed, want) {
		t.Errorf("removed %v after the release, want %v", removed, want)
	}
}
