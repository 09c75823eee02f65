//go:build !linux

package oci

import "log/slog"

// StartReaper does nothing off Linux (see reaper_linux.go).
func StartReaper(logger *slog.Logger) {}
