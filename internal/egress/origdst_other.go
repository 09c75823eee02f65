//go:build !linux

package egress

import (
	"errors"
	"net"
	"net/netip"
)

// originalDst needs Linux's conntrack.
func originalDst(net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.ErrUnsupported
}
