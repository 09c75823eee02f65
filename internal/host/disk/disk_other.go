//go:build !linux

package disk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

var errUnsupported = fmt.Errorf("disk pool needs Linux: %w", errors.ErrUnsupported)

// Open is only implemented on Linux.
func Open(ctx context.Context, dir string, opts Options, logger *slog.Logger) (*Pool, error) {
	return nil, errUnsupported
}

// Close is only implemented on Linux.
func (p *Pool) Close(ctx context.Context) error { return errUnsupported }

// CreateImage is only implemented on Linux.
func (p *Pool) CreateImage(ctx context.Context, name string, sizeGB int) (string, error) {
	return "", errUnsupported
}

// MountImage is only implemented on Linux.
func (p *Pool) MountImage(ctx context.Context, name, mountpoint string) error { return errUnsupported }

// UnmountImage is only implemented on Linux.
func (p *Pool) UnmountImage(ctx context.Context, mountpoint string) error { return errUnsupported }

// RemoveImage is only implemented on Linux.
func (p *Pool) RemoveImage(ctx context.Context, name string) error { return errUnsupported }

// GrowImage is only implemented on Linux.
func (p *Pool) GrowImage(ctx context.Context, name, mountpoint string, newGB int) error {
	return errUnsupported
}

// CloneImage is only implemented on Linux.
func (p *Pool) CloneImage(ctx context.Context, src, dst string) error { return errUnsupported }

// Unmount is only implemented on Linux.
func Unmount(ctx context.Context, target string) error { return errUnsupported }

// MountOverlay is only implemented on Linux.
func MountOverlay(ctx context.Context, lower, upper, work, target string) error {
	return errUnsupported
}

// Freeze is only implemented on Linux.
func Freeze(ctx context.Context, mountpoint string) error { return errUnsupported }

// Thaw is only implemented on Linux.
func Thaw(ctx context.Context, mountpoint string) error { return errUnsupported }

// ReplaceImage is only implemented on Linux.
func (p *Pool) ReplaceImage(ctx context.Context, src, dst string) error { return errUnsupported }

// EnableSpares is only implemented on Linux.
func (p *Pool) EnableSpares(ctx context.Context, n int, dirs []string, warm ...int) error {
	return errUnsupported
}

// TakeSpare is only implemented on Linux.
func (p *Pool) TakeSpare(ctx context.Context, name string, sizeGB int, mountpoint string) (bool, error) {
	return false, nil
}

// DropSpares is only implemented on Linux.
func (p *Pool) DropSpares(ctx context.Context) error { return nil }

// LoopBackingFiles is only implemented on Linux.
func LoopBackingFiles() []string { return nil }
