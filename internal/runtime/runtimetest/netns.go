package runtimetest

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/testenv"
)

// NetNS is a network namespace set up as the host layer sets up a
// sandbox's: a veth pair with one end (Iface) inside, holding Prefix's
// address with a default route via the host end, and the other end on the
// host with the gateway address. Only the host and that namespace share
// the /30, so tests reach the sandbox and nothing else.
type NetNS struct {
	// Path is the namespace's bind mount, for Spec.NetNSPath.
	Path string
	// Iface is the interface inside the namespace.
	Iface string
	// Prefix is the sandbox's address with its prefix length.
	Prefix netip.Prefix
	// Gateway is the host end's address.
	Gateway netip.Addr
	name    string
}

// NewNetNS creates a namespace with a random /30 from 198.18.0.0/15 (the
// benchmarking range, RFC 2544) and removes it, with its veth, when the
// test ends.
func NewNetNS(t testing.TB) *NetNS {
	t.Helper()
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "ip")
	suffix := randHex(t, 4)
	n := &NetNS{name: "rtt-" + suffix, Iface: "rttveth0"}
	n.Path = filepath.Join("/run/netns", n.name)
	hostIf := "rth" + suffix
	base := netip.AddrFrom4([4]byte{198, 18 + byte(rand.IntN(2)), byte(rand.IntN(256)), byte(rand.IntN(64) * 4)})
	n.Gateway = base.Next()
	n.Prefix = netip.PrefixFrom(n.Gateway.Next(), 30)

	ipCmd(t, "netns", "add", n.name)
	t.Cleanup(func() {
		exec.Command("ip", "link", "delete", hostIf).Run()
		exec.Command("ip", "netns", "delete", n.name).Run()
	})
	ipCmd(t, "link", "add", hostIf, "type", "veth", "peer", "name", n.Iface, "netns", n.name)
	ipCmd(t, "addr", "add", netip.PrefixFrom(n.Gateway, 30).String(), "dev", hostIf)
	ipCmd(t, "link", "set", hostIf, "up")
	ipCmd(t, "-n", n.name, "link", "set", "lo", "up")
	ipCmd(t, "-n", n.name, "addr", "add", n.Prefix.String(), "dev", n.Iface)
	ipCmd(t, "-n", n.name, "link", "set", n.Iface, "up")
	ipCmd(t, "-n", n.name, "route", "add", "default", "via", n.Gateway.String())
	return n
}

// Addrs lists the IPv4 addresses (CIDR) on Iface inside the namespace.
func (n *NetNS) Addrs(t testing.TB) []string {
	t.Helper()
	out, err := exec.Command("ip", "-n", n.name, "-o", "-4", "addr", "show", "dev", n.Iface).CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr in %s: %v: %s", n.name, err, out)
	}
	var addrs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" {
				addrs = append(addrs, f[i+1])
			}
		}
	}
	return addrs
}

// Get fetches http://<sandbox address>:port/ from the host, retrying until
// the server answers (or waitTimeout), and returns the body.
func (n *NetNS) Get(t testing.TB, port int) string {
	t.Helper()
	client := &http.Client{
		Timeout: 2 * time.Second,
		// No connection outlives the request: a checkpoint must not find
		// one of ours half open.
		Transport: &http.Transport{DisableKeepAlives: true},
	}
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(n.Prefix.Addr().String(), fmt.Sprint(port)))
	var body string
	var lastErr error
	deadline := time.Now().Add(waitTimeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				body = string(b)
				return body
			}
			err = fmt.Errorf("status %s, read error %v", resp.Status, rerr)
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: no answer after %v: %v", url, waitTimeout, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ipCmd(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}
