// Package codeinterp carries the code-interpreter server that pt-agent
// runs inside sandboxes of the code-interpreter template
// (docs/code-interpreter.md): a Python process (the standard library) managing
// one kernel or REPL per context and serving E2B code-interpreter's wire
// format and Platinum's own on port 49999. The sources ship inside
// pt-agent, not the template, so a template version never pins an old
// server and the template's cached image does not change when it does.
package codeinterp

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

//go:embed server.py
var serverPy []byte

//go:embed repl.js
var replJS []byte

// Port is where the server listens in the sandbox (E2B's JUPYTER_PORT).
const Port = 49999

// Marker is the template file (absolute inside the sandbox) whose
// presence makes pt-agent run the server.
const Marker = "/etc/platinum/code-interpreter"

// EnvFile is where pt-agent writes the sandbox's current environment for
// the server, which applies it before every cell.
const EnvFile = "/run/platinum/env.json"

// Enabled reports whether this sandbox's template asks for the server.
func Enabled() bool {
	_, err := os.Stat(Marker)
	return err == nil
}

// Install writes the server's sources into dir.
func Install(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("code interpreter: %w", err)
	}
	for name, b := range map[string][]byte{"server.py": serverPy, "repl.js": replJS} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("code interpreter: %w", err)
		}
	}
	return nil
}

// Starter starts a process and returns its pid and a channel that gets
// its exit (pt-agent's reaper, which owns every child's wait status).
type Starter func(cmd *exec.Cmd) (pid int, exited <-chan error, err error)

// Supervise installs the server into dir and keeps it running until ctx
// ends: a server that exits is started again after a second (its kernels
// go with it; the next cell starts fresh ones and says so).
func Supervise(ctx context.Context, dir string, start Starter, log *slog.Logger) {
	if err := Install(dir); err != nil {
		log.Error("code interpreter", "err", err)
		return
	}
	for ctx.Err() == nil {
		cmd := exec.Command("python3", filepath.Join(dir, "server.py"))
		cmd.Dir = "/"
		cmd.Env = append(os.Environ(), "PT_CODE_ENV_FILE="+EnvFile, fmt.Sprintf("PT_CODE_PORT=%d", Port),
			"PYTHONUNBUFFERED=1", "HOME=/root")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		pid, exited, err := start(cmd)
		if err != nil {
			log.Error("code interpreter start", "err", err)
		} else {
			log.Info("code interpreter started", "pid", pid, "port", Port)
			select {
			case err := <-exited:
				log.Warn("code interpreter exited", "err", err)
			case <-ctx.Done():
				_ = syscall.Kill(-pid, syscall.SIGTERM)
				return
			}
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return
		}
	}
}
