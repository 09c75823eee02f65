package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/platinum-dev/platinum/internal/host"
)

// defaultRuntime resolves --default-runtime. Empty (the default) means the
// strongest isolation that works here: gvisor when runsc is installed and
// runs a throwaway sandbox (its runtime conformance suite passes on these
// hosts, see internal/runtime/oci), else runc, with a log line saying why.
// An explicit class must be installed.
func defaultRuntime(ctx context.Context, flag string, h *host.Host, log *slog.Logger) (string, error) {
	if flag != "" {
		if err := h.ClassWorks(ctx, flag); err != nil && flag != host.ClassRunc {
			return "", fmt.Errorf("--default-runtime %s: %w", flag, err)
		}
		return flag, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := h.ClassWorks(pctx, host.ClassGVisor); err != nil {
		log.Warn("default runtime class is runc: gvisor does not run here", "err", err)
		return host.ClassRunc, nil
	}
	log.Info("default runtime class is gvisor")
	return host.ClassGVisor, nil
}
