package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/postgres"
	"github.com/platinum-dev/platinum/internal/store/remote"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
)

// storeFlag is a parsed --store: which implementation, and where.
type storeFlag struct {
	kind string // "sqlite", "postgres" or "remote" (a joined host's)
	// target is the SQLite file's absolute path, the PostgreSQL URL, or
	// the URL of the ptd a host joined.
	target string
}

// parseStore reads --store. Empty is today's embedded default, SQLite at
// <data-dir>/platinum.db; postgres:// and postgresql:// URLs name a
// PostgreSQL database; sqlite://PATH and anything else without a scheme
// name a SQLite file (relative paths from the working directory).
func parseStore(arg, dataDir string) (storeFlag, error) {
	switch {
	case arg == "":
		return storeFlag{kind: "sqlite", target: filepath.Join(dataDir, "platinum.db")}, nil
	case strings.HasPrefix(arg, "postgres://"), strings.HasPrefix(arg, "postgresql://"):
		return storeFlag{kind: "postgres", target: arg}, nil
	case strings.HasPrefix(arg, "sqlite://"):
		arg = strings.TrimPrefix(arg, "sqlite://")
		if arg == "" {
			return storeFlag{}, fmt.Errorf("--store sqlite:// needs a file path (sqlite:///var/lib/platinum/platinum.db)")
		}
	case strings.Contains(arg, "://"):
		scheme, _, _ := strings.Cut(arg, "://")
		return storeFlag{}, fmt.Errorf("--store: unknown scheme %q: want a SQLite path, sqlite://PATH or postgres://…", scheme)
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return storeFlag{}, fmt.Errorf("--store: %w", err)
	}
	return storeFlag{kind: "sqlite", target: abs}, nil
}

// String names the store for logs, never with the URL (it may carry a
// password).
func (f storeFlag) String() string {
	switch f.kind {
	case "postgres":
		return "postgres"
	case "remote":
		return "joined " + f.target
	}
	return "sqlite " + f.target
}

// openStore opens (and migrates) the store --store names; a joined host's
// is the platform ptd's, reached with the host token.
func openStore(ctx context.Context, f storeFlag, hostToken string, log *slog.Logger) (store.Store, error) {
	var st store.Store
	var err error
	switch f.kind {
	case "remote":
		st, err = remote.Dial(ctx, f.target, hostToken, log)
	case "postgres":
		st, err = postgres.Open(ctx, f.target, log)
	default:
		st, err = sqlite.Open(ctx, f.target, log)
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return st, nil
}
