package main

import (
	"bytes"
	"context"
	"debug/elf"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/testenv"
)

func TestRunNeedsToken(t *testing.T) {
	t.Setenv("PT_AGENT_TOKEN", "")
	if err := run(t.Context()); err == nil || !strings.Contains(err.Error(), "PT_AGENT_TOKEN") {
		t.Fatalf("run without token: %v", err)
	}
}

// TestPID1 builds the static binary and runs it as PID 1 of a fresh PID
// namespace: commands keep their exit statuses, orphans are reaped, the
// token is not inherited, and SIGTERM stops it cleanly.
func TestPID1(t *testing.T) {
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "unshare")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	bin := filepath.Join(t.TempDir(), "pt-agent")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	const token = "pid1-token"
	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount-proc", bin)
	cmd.Env = append(os.Environ(), "PT_AGENT_TOKEN="+token, "PT_AGENT_ADDR="+addr)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill() // --kill-child takes the agent down with unshare
		<-waited
		if t.Failed() {
			t.Logf("agent logs:\n%s", logs.String())
		}
	})

	c := agentclient.New("http://"+addr, token, nil)
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	exec := func(script string) (agentclient.ExitResult, string) {
		t.Helper()
		var out bytes.Buffer
		res, err := c.Exec(ctx, agentclient.ExecRequest{Cmd: "/bin/sh", Args: []string{"-c", script}}, func(b []byte) { out.Write(b) }, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res, out.String()
	}
	if res, out := exec("echo $$; echo ${PT_AGENT_TOKEN:-unset}; sleep 0.05 & exit 3"); res.Code != 3 || !strings.HasSuffix(out, "\nunset\n") {
		t.Fatalf("first exec: %+v %q", res, out)
	}
	if res, _ := exec("kill -TERM $$"); res.Code != -1 || !res.Signaled || res.Status != "signal: terminated" {
		t.Fatalf("signaled exec: %+v", res)
	}
	// The orphaned sleep was re-parented to pt-agent (PID 1): once it has
	// exited it must have been reaped, leaving no zombie children of PID 1.
	for {
		_, out := exec(`for f in /proc/[0-9]*/stat; do read -r line < "$f" 2>/dev/null && echo "$line"; done`)
		zombies := 0
		for _, line := range strings.Split(out, "\n") {
			if i := strings.LastIndexByte(line, ')'); i > 0 {
				f := strings.Fields(line[i+1:])
				if len(f) > 1 && f[0] == "Z" && f[1] == "1" {
					zombies++
				}
			}
		}
		sleeping := strings.Contains(out, "(sleep)")
		if zombies == 0 && !sleeping {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("zombies of PID 1 left:\n%s", out)
		case <-time.After(20 * time.Millisecond):
		}
	}

	// SIGTERM to the agent (PID 1 inside, a child of unshare outside).
	agentPID := childOf(t, cmd.Process.Pid)
	if err := syscall.Kill(agentPID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		waited <- err // for the cleanup
		if err != nil {
			t.Fatalf("agent exit: %v\n%s", err, logs.String())
		}
	case <-ctx.Done():
		t.Fatal("agent did not stop on SIGTERM")
	}
}

// childOf returns the single child pid of pid.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("children of %d: %q", pid, b)
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// TestCgoBuildIsStatic builds pt-agent the way `go build ./cmd/...` does
// where a C compiler exists (cgo on) and checks that the binary still runs
// where there is no C library: no program interpreter, no shared
// libraries, and it starts in an empty root.
func TestCgoBuildIsStatic(t *testing.T) {
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "gcc")
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	root := t.TempDir()
	bin := filepath.Join(root, "pt-agent")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("a cgo build of pt-agent has a program interpreter (dynamically linked)")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Fatalf("a cgo build of pt-agent needs shared libraries %v (%v)", libs, err)
	}
	// Nothing but the binary in its root: a dynamic one would fail to load.
	cmd := exec.CommandContext(ctx, "chroot", root, "/pt-agent")
	cmd.Env = []string{"PT_AGENT_TOKEN="}
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "PT_AGENT_TOKEN") {
		t.Fatalf("pt-agent in an empty root: %s", out)
	}
}
