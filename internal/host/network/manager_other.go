//go:build !linux

package network

import (
	"context"
	"errors"
	"fmt"
)

var errUnsupported = fmt.Errorf("sandbox networking needs Linux: %w", errors.ErrUnsupported)

// Setup is only implemented on Linux.
func (m *Manager) Setup(ctx context.Context) error { return errUnsupported }

// Recover is only implemented on Linux.
func (m *Manager) Recover(ctx context.Context) error { return errUnsupported }

// Teardown is only implemented on Linux.
func (m *Manager) Teardown(ctx context.Context) error { return errUnsupported }

// Attach is only implemented on Linux.
func (m *Manager) Attach(ctx context.Context, id string) (Endpoint, error) {
	return Endpoint{}, errUnsupported
}

// Detach is only implemented on Linux.
func (m *Manager) Detach(ctx context.Context, id string) error { return errUnsupported }

// SetPolicy is only implemented on Linux.
func (m *Manager) SetPolicy(ctx context.Context, id string, p Policy) error { return errUnsupported }

// HasNamespace is only implemented on Linux.
func (m *Manager) HasNamespace(id string) bool { return false }

// RemoveUnknown is only implemented on Linux.
func (m *Manager) RemoveUnknown(ctx context.Context, known []string) ([]string, error) {
	return nil, errUnsupported
}
