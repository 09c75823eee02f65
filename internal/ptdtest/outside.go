package ptdtest

import (
	"crypto/rand"
	"math/big"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

// Outside is "the internet" for a test: a network namespace the test
// creates, reached from the host over a veth pair, with addresses in a
// random /28 of 198.18.0.0/15 (the benchmarking range, never routed
// anywhere), so sandbox egress can be tested without leaving the machine.
type Outside struct {
	// NS and Veth name the namespace and the host's end of the veth.
	NS, Veth string
	// Host is the host's address on the veth; the namespace routes
	// through it.
	Host netip.Addr
	// Addrs are the namespace's own addresses.
	Addrs []netip.Addr
}

// NewOutside builds a namespace with n addresses, named with prefix
// ("<prefix>-out-<hex>", veth "<prefix><hex>": prefix at most 9
// characters). Everything is removed in t.Cleanup, even on failure.
func NewOutside(t testing.TB, prefix string, n int) *Outside {
	t.Helper()
	suffix := RandHex(3)
	o := &Outside{NS: prefix + "-out-" + suffix, Veth: prefix + suffix}
	r, err := rand.Int(rand.Reader, big.NewInt(1<<13))
	if err != nil {
		t.Fatal(err)
	}
	v := r.Int64()
	base := netip.AddrFrom4([4]byte{198, 18 + byte(v>>12), byte(v >> 4 & 0xff), byte(v & 0xf << 4)})
	o.Host = base.Next()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", o.Veth).Run()
		exec.Command("ip", "netns", "del", o.NS).Run()
	})
	run("netns", "add", o.NS)
	run("link", "add", o.Veth, "type", "veth", "peer", "name", "eth0", "netns", o.NS)
	run("addr", "add", o.Host.String()+"/28", "dev", o.Veth)
	run("link", "set", o.Veth, "up")
	run("-n", o.NS, "link", "set", "lo", "up")
	run("-n", o.NS, "link", "set", "eth0", "up")
	a := o.Host
	for range n {
		a = a.Next()
		run("-n", o.NS, "addr", "add", a.String()+"/28", "dev", "eth0")
		o.Addrs = append(o.Addrs, a)
	}
	run("-n", o.NS, "route", "add", "default", "via", o.Host.String())
	return o
}

// Listen opens a TCP (IPv4) listener on addr inside the namespace; it is
// closed in t.Cleanup.
func (o *Outside) Listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result)
	go func() {
		// This thread's namespace changes: lock it and let it die with the
		// goroutine instead of returning to the pool.
		runtime.LockOSThread()
		ns, err := netns.GetFromName(o.NS)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			ch <- result{err: err}
			return
		}
		ln, err := net.Listen("tcp4", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen in %s: %v", o.NS, r.err)
	}
	t.Cleanup(func() { r.ln.Close() })
	return r.ln
}

// Serve listens on addr inside the namespace and hands each connection,
// one at a time, to answer, then closes it: a server a sandbox's egress
// policy can allow or block. It stops when the test ends.
func (o *Outside) Serve(t testing.TB, addr string, answer func(net.Conn)) {
	t.Helper()
	ln := o.Listen(t, addr)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			answer(c)
			c.Close()
		}
	}()
}
