// Package upstream names a proxy's connections to a sandbox by the
// sandbox's boot. An http.Transport keeps idle connections keyed by the
// request URL's host; keyed by the sandbox's address alone, a connection
// kept to one sandbox is handed to the next sandbox that gets the address
// (or to the same sandbox after a stop and start), whose network resets
// it, and a POST sent on it cannot be retried: the caller sees a 502.
// Proxies put Host's name in the outgoing URL and dial with Dial.
package upstream

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

const suffix = ".sandbox"

// Host is the pool name of addr (ip:port) in sb's current boot:
// "a<hex ip>.<id>-<boot>.sandbox:port". An addr that is not ip:port is
// returned unchanged.
func Host(sb sandbox.Sandbox, addr string) string {
	host, port, err := net.SplitHostPort(addr)
	ip, perr := netip.ParseAddr(host)
	if err != nil || perr != nil {
		return addr
	}
	boot := sb.CreatedAt
	if sb.LastStart != nil {
		boot = sb.LastStart.At
	}
	return fmt.Sprintf("a%x.%s-%s%s:%s", ip.AsSlice(), sandboxKey(sb.ID), strconv.FormatInt(boot.UnixNano(), 36), suffix, port)
}

// Addr is the address a Host name stands for (addr itself when it is not
// one).
func Addr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	label, _, ok := strings.Cut(host, ".")
	if !ok || !strings.HasSuffix(host, suffix) || !strings.HasPrefix(label, "a") {
		return addr, nil
	}
	b, err := hex.DecodeString(label[1:])
	if err != nil {
		return "", fmt.Errorf("sandbox address %q: %w", host, err)
	}
	ip, ok := netip.AddrFromSlice(b)
	if !ok {
		return "", fmt.Errorf("sandbox address %q: not an IP", host)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// Dial is d.DialContext for a transport whose URLs carry Host names. It
// records each connection to a sandbox for Abort.
func Dial(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, err := Addr(addr)
		if err != nil {
			return nil, err
		}
		c, err := d.DialContext(ctx, network, to)
		if err != nil {
			return nil, err
		}
		return track(keyOf(addr), c)
	}
}
