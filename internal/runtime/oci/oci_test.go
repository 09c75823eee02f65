package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/runtimetest"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// runcConfig is the runc class's default config with its state in the
// test's temporary dir; it requires root and runc.
func runcConfig(t *testing.T) Config {
	t.Helper()
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "runc")
	cfg := DefaultConfig()
	cfg.Root = filepath.Join(t.TempDir(), "runc-state")
	return cfg
}

func newRunc(t *testing.T) *Runtime {
	t.Helper()
	r, err := New(runcConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRuncConformance(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) runtime.Runtime {
		// NewRuntime, so the checkpoint tests run where CRIU >= 4.1 works.
		rt, err := NewRuntime(runcConfig(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		return rt
	})
}

// TestRuncCheckpointSupport checks that the runc class claims checkpoints
// exactly when CRIU works here.
func TestRuncCheckpointSupport(t *testing.T) {
	r := newRunc(t)
	want := criuSupport(context.Background()) == nil
	rt, err := NewRuntime(r.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, reason := Supports(rt); got != want {
		t.Errorf("Supports(runc) = %v (%s), want %v", got, reason, want)
	}
}

func TestName(t *testing.T) {
	if got := newRunc(t).Name(); got != "runc" {
		t.Errorf("Name() = %q, want runc", got)
	}
}

func TestNewErrors(t *testing.T) {
	var ce *ConfigError
	if _, err := New(Config{Root: "relative"}, nil); !errors.As(err, &ce) || ce.Field != "Root" {
		t.Errorf("New(relative root) = %v, want ConfigError{Root}", err)
	}
	_, err := New(Config{Binary: "platinum-no-such-runtime", Root: t.TempDir()}, nil)
	if !errors.As(err, &ce) || ce.Field != "Binary" {
		t.Errorf("New(missing binary) = %v, want ConfigError{Binary}", err)
	}
}

// TestRuncSeccomp checks the parts of our profile the conformance suite
// does not cover because they are runc-specific policy.
func TestRuncSeccomp(t *testing.T) {
	r := newRunc(t)
	c := runtimetest.Start(t, r, runtimetest.NewSpec(t, `
		exec > /results 2>/dev/null
		unshare -U true; echo "userns=$?"
		linux32 true; echo "linux32=$?"
		dmesg > /dev/null; echo "syslog=$?"
		echo "nofile=$(ulimit -n)"
		echo "nonewprivs=$(awk '/^NoNewPrivs/ { print $2 }' /proc/self/status)"
		echo "capeff=$(awk '/^CapEff/ { print $2 }' /proc/self/status)"
		echo "capinh=$(awk '/^CapInh/ { print $2 }' /proc/self/status)"
		echo "seccomp=$(awk '/^Seccomp:/ { print $2 }' /proc/self/status)"
		: > /done
		exec sleep 1000000`))
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	c.WantResults(t, map[string]string{
		"userns":     "1",
		"linux32":    "0", // PER_LINUX32 stays allowed
		"syslog":     "1",
		"nofile":     strconv.FormatUint(min(maxNofile, uint64(lim.Max)), 10),
		"nonewprivs": "1",
		// CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP
		// NET_BIND_SERVICE SYS_CHROOT AUDIT_WRITE SETFCAP
		"capeff":  "00000000a00405fb",
		"capinh":  "0000000000000000",
		"seccomp": "2",
	})
}

// TestRunErrorQuotesLog checks that a failing start reports runc's own
// message from the bundle's log, not just "exit status 1".
func TestRunErrorQuotesLog(t *testing.T) {
	testRunErrorQuotesLog(t, newRunc(t), "runc")
}

// testRunErrorQuotesLog starts a missing binary on rt, whose OCI runtime
// is bin, and checks that the error quotes bin's own message.
func testRunErrorQuotesLog(t *testing.T, rt runtime.Runtime, bin string) {
	spec := runtimetest.NewSpec(t, "true")
	spec.Args = []string{"/no/such/binary"}
	t.Cleanup(func() { rt.Delete(context.Background(), spec.ID) })
	err := rt.Run(context.Background(), spec)
	if err == nil {
		t.Fatal("Run with a missing binary succeeded")
	}
	if !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Run error = %q, want %s's message about the missing binary", err, bin)
	}
}

func TestRunInvalidSpec(t *testing.T) {
	r := newRunc(t)
	spec := runtimetest.NewSpec(t, "true")
	spec.CgroupPath = ""
	if err := r.Run(context.Background(), spec); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("Run(no cgroup path) = %v, want ErrInvalidArgument", err)
	}
	if _, err := os.Stat(filepath.Join(spec.BundleDir, "config.json")); err == nil {
		t.Errorf("invalid spec still wrote config.json")
	}
}
