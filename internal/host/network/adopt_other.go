//go:build !linux

package network

import (
	"context"
	"net/netip"
)

// Adopt is only implemented on Linux.
func (m *Manager) Adopt(ctx context.Context, id string, addr netip.Addr) (Endpoint, error) {
	return Endpoint{}, errUnsupported
}
