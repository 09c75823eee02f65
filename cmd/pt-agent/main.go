//go:debug netdns=go

// Command pt-agent is the init process (PID 1) of every sandbox: it serves
// the envd-compatible process/filesystem API on PT_AGENT_ADDR (default
// :49983), reaps orphaned zombies, and on SIGTERM/SIGINT relays the signal
// to the processes it started and exits.
//
// Configuration comes from the environment: PT_AGENT_TOKEN (required; it is
// removed from the environment at once so children never inherit it),
// PT_AGENT_ADDR, and PT_MEMORY_GUARD=1 or =poked, which makes it the
// sandbox's OOM killer (gVisor sandboxes; see internal/agent/memguard.go;
// poked: the host signals it when the sandbox's memory grows).
//
// Other modes run as ordinary commands inside the sandbox: `identity` and
// `sync` for the host, `sftp-server` for the SSH gateway's sftp subsystem.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/agent"
	"github.com/platinum-dev/platinum/internal/agent/codeinterp"
	"github.com/platinum-dev/platinum/internal/agent/envscript"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "identity" || os.Args[1] == "sync" || os.Args[1] == "sftp-server" || os.Args[1] == "trust") {
		cmd := identity
		switch os.Args[1] {
		case "trust":
			cmd = trust
		case "sync":
			cmd = func([]string) error { return syncAll() }
		case "sftp-server":
			cmd = func(args []string) error { return sftpServer(args, os.Stdin, os.Stdout) }
		}
		if err := cmd(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "pt-agent:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "pt-agent:", err)
		os.Exit(1)
	}
}

// stopGrace is how long children get to exit after a relayed SIGTERM
// before they are killed.
const stopGrace = 5 * time.Second

func run(ctx context.Context) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	token := os.Getenv("PT_AGENT_TOKEN")
	if token == "" {
		return errors.New("PT_AGENT_TOKEN: required")
	}
	os.Unsetenv("PT_AGENT_TOKEN")
	addr := os.Getenv("PT_AGENT_ADDR")
	if addr == "" {
		addr = ":49983"
	}

	// Signals first, so a SIGTERM during startup is not lost (as PID 1 an
	// unhandled SIGTERM would simply be ignored by the kernel).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT)
	defer signal.Stop(sigs)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := agent.DefaultConfig()
	cfg.Token = token
	cfg.Logger = logger
	cfg.EnvScript = envscript.Path
	ci := codeinterp.Enabled()
	if ci {
		cfg.EnvFile = codeinterp.EnvFile
		cfg.CodeInterpreter = fmt.Sprintf("http://127.0.0.1:%d", codeinterp.Port)
	}
	if g := os.Getenv("PT_MEMORY_GUARD"); g == "1" || g == "poked" {
		// A gVisor sandbox: be its OOM killer (internal/agent/memguard.go);
		// "poked": the host signals when the sandbox's memory grows.
		cfg.MemoryGuard = agent.NewMemoryGuard(g == "poked")
		if g == "poked" {
			cfg.MemoryGuard.PokeOnSignal(ctx)
		}
		go cfg.MemoryGuard.Run(ctx)
	}
	os.Unsetenv("PT_MEMORY_GUARD")
	if os.Getpid() == 1 {
		cfg.Reaper = agent.NewReaper()
		go cfg.Reaper.Run(ctx)
	}
	srv, err := agent.New(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	if ci {
		// The code-interpreter template's server (docs/code-interpreter.md).
		go codeinterp.Supervise(ctx, "/run/platinum/code-interpreter", srv.StartService, logger)
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true) // h2c for hosts that want multiplexing
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	logger.Info("pt-agent listening", "addr", ln.Addr().String(), "pid1", cfg.Reaper != nil)

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case sig := <-sigs:
		logger.Info("stopping", "signal", sig.String())
		srv.Signal(sig.(unix.Signal))
		done := make(chan struct{})
		timer := time.AfterFunc(stopGrace, func() { close(done) })
		srv.Wait(done)
		timer.Stop()
		shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer stop()
		_ = hs.Shutdown(shutdownCtx) // streams may still be open; Close follows
		_ = hs.Close()
		return nil
	}
}
