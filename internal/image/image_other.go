//go:build !linux

package image

import (
	"context"
	"errors"
	"io"
)

var errUnsupported = errors.New("image: only implemented on Linux")

func (s *Store) storeLayer(ctx context.Context, r io.Reader, want string, b *budget, check func() error) (string, error) {
	return "", errUnsupported
}

// Flatten is only implemented on Linux.
func (s *Store) Flatten(ctx context.Context, dest, base string, layers []string) error {
	return errUnsupported
}

// ImportDir is only implemented on Linux.
func (s *Store) ImportDir(ctx context.Context, upper string, exclude []string) (string, error) {
	return "", errUnsupported
}

// Size is only implemented on Linux.
func Size(dir string) int64 { return 0 }

func removeAll(dir string) {}

// WriteTree is only implemented on Linux.
func WriteTree(ctx context.Context, root string, w io.Writer) error { return errUnsupported }

// UnpackTree is only implemented on Linux.
func UnpackTree(ctx context.Context, r io.Reader, dest string) error { return errUnsupported }
