//go:build !linux

package oci

import (
	"context"
	"errors"
)

// watchOOM is only implemented on Linux.
func (r *Runtime) watchOOM(ctx context.Context, id string) error {
	return errors.ErrUnsupported
}
