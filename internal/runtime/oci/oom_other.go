//go:build !linux

package oci

import (
	"context"
	"errors"
)

// watchOOM is only implemented on Linux.
func (r *Runtime) watchOOM(ctx context.Context, id string) (func() error, error) {
	return nil, errors.ErrUnsupported
}

// endedForMemory is only implemented on Linux.
func (r *Runtime) endedForMemory(id string) bool { return false }
