// Command ptd is the Platinum daemon. `ptd serve` runs the API, the control
// plane and this machine's sandbox host in one process with embedded
// defaults (SQLite, local disks). `ptd reset` removes everything a data
// dir's host created on this machine.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ptd:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: ptd serve [flags] | ptd reset --data-dir DIR | ptd version")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:])
	case "reset":
		return reset(ctx, args[1:])
	case "version":
		fmt.Println("ptd", version)
		return nil
	}
	return fmt.Errorf("unknown command %q: try `ptd serve` or `ptd reset`", args[0])
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"
