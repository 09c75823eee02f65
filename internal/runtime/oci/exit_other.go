//go:build !linux

package oci

import (
	"context"
	"errors"
	"os"
)

// Exit watches are only implemented on Linux.
func openPidfd(int) (*os.File, error) { return nil, errors.ErrUnsupported }

func waitPidfd(context.Context, *os.File) bool { return false }
