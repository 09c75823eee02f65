// Command load holds a ptd under load and checks what it leaves behind:
// N sandboxes created at once (busybox by default, alternating runc and
// gVisor) while M API clients list, get, exec in and upload to the running
// ones for a set duration. It prints each operation's throughput, p50, p95
// and p99 and its answers by status code, where only 2xx and the documented
// refusals of a busy host (429 quota, 503 capacity; retried after
// Retry-After as the SDKs do) are allowed; then it deletes every sandbox,
// and fails when one is stuck, a create ended failed, or the host still has
// a mount, loop device, network namespace, veth, cgroup, directory or
// process of a deleted sandbox (or a runtime process no sandbox owns).
//
// It starts its own ptd (like the end-to-end tests), so it needs root and
// what scripts/setup.sh installs. A short run is part of the test suite
// (load_test.go); numbers of full runs are in bench/README.md.
//
//	go run ./bench/load [-creates 200] [-clients 100] [-duration 10m] [-classes runc,gvisor]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

func main() { benchkit.Main("bench/load", run) }

func run() error {
	cfg := DefaultConfig()
	flag.IntVar(&cfg.Creates, "creates", cfg.Creates, "sandboxes created at once at the start")
	flag.IntVar(&cfg.Clients, "clients", cfg.Clients, "API clients listing, getting, executing and uploading")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the clients run")
	flag.DurationVar(&cfg.Grace, "grace", cfg.Grace, "bound on the wait for creates past -duration, and for the deletes at the end")
	classes := flag.String("classes", strings.Join(cfg.Classes, ","), "runtime classes the creates alternate between")
	flag.StringVar(&cfg.Template, "template", cfg.Template, "template of every sandbox")
	flag.Float64Var(&cfg.CPU, "cpu", cfg.CPU, "cpu of every sandbox")
	flag.IntVar(&cfg.RAMMB, "ram-mb", cfg.RAMMB, "ram_mb of every sandbox")
	flag.IntVar(&cfg.DiskGB, "disk-gb", cfg.DiskGB, "disk_gb of every sandbox")
	logLevel := flag.String("ptd-log-level", "warn", "ptd's --log-level")
	flag.Parse()
	cfg.Classes = strings.Split(*classes, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	d, err := startDaemon(root, cfg, *logLevel)
	defer d.Stop()
	if err != nil {
		return err
	}
	rep, err := Run(ctx, cfg, Target{URL: d.URL, Token: d.Token, DataDir: d.DataDir, Bridge: d.Bridge, Cgroup: d.Cgroup, PID: d.PID()})
	if rep != nil {
		rep.Print(os.Stdout)
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		// Stop removes the daemon's directory: keep its log for the reader.
		kept := filepath.Join(os.TempDir(), fmt.Sprintf("pt-load-%d.log", time.Now().Unix()))
		if b, err := os.ReadFile(filepath.Join(d.BinDir, "ptd.log")); err == nil && os.WriteFile(kept, b, 0o644) == nil {
			return fmt.Errorf("the run found problems (above); ptd's log is kept in %s", kept)
		}
		return errors.New("the run found problems (above)")
	}
	return nil
}

// startDaemon starts a ptd whose org quotas fit the run: every create of
// the run counts against the one org of the admin token.
func startDaemon(root string, cfg Config, logLevel string) (*ptdtest.Daemon, error) {
	n := cfg.Creates + 16
	return ptdtest.Start(ptdtest.Options{RepoRoot: root, ExtraArgs: []string{
		"--log-level", logLevel,
		"--org-max-sandboxes", strconv.Itoa(n),
		"--org-max-cpu", strconv.Itoa(int(float64(n)*cfg.CPU) + 1),
		"--org-max-ram-mb", strconv.Itoa(n * cfg.RAMMB),
	}})
}
