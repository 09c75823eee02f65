// Package tssdk runs the TypeScript SDK (sdk/ts, @platinum-dev/sdk)
// against a real ptd: its end-to-end suites under node --test (the docs'
// TypeScript examples verbatim, typed errors, retries, waits, streamed
// files and exec, run code, processes), a start refused by the start
// admission queue of a second ptd, and the packed tarball installed into an
// empty project and loaded with both import and require.
package tssdk

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/testenv"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// env is the one ptd every test of this package talks to.
var env struct {
	url, token string
	skip       string
}

// sdkDir is the SDK's package directory, root the repository's.
var sdkDir, root string

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	var err error
	root, err = filepath.Abs("../../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "ts sdk:", err)
		return 1
	}
	sdkDir = filepath.Join(root, "sdk", "ts")
	env.skip = "the TypeScript SDK tests need root (they run real sandboxes)"
	return ptdtest.Main(m, "ts sdk", ptdtest.Options{ExtraArgs: []string{"--pids-limit", "512"}},
		func(d *ptdtest.Daemon) error {
			env.url, env.token, env.skip = d.URL, d.Token, ""
			// Build every template the suites use before they run: a first
			// build (pt-base ≈1 min, python-node a few) would outlast the
			// suites' waits, which is not what they test.
			c := platinum.New(d.URL, d.Token)
			for _, tpl := range []string{"busybox", "pt-base", "python-node", "code-interpreter"} {
				ctx, cancel := context.WithTimeout(context.Background(), 26*time.Minute)
				sb, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: tpl}, platinum.WaitForRunning(25*time.Minute))
				cancel()
				if err != nil {
					return fmt.Errorf("warm %s: %w", tpl, err)
				}
				c.Sandboxes.Delete(context.Background(), sb.ID)
			}
			return nil
		})
}

// nodeReady finds node and the SDK's dev dependencies; outside CI their
// absence skips, in CI it fails.
func nodeReady(t *testing.T) string {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	return testenv.RequiresNode(t, sdkDir, "typescript")
}

// run runs an npm script of the SDK against the suite's ptd; see runAt.
func run(t *testing.T, timeout time.Duration, args ...string) string {
	t.Helper()
	return runAt(t, env.url, env.token, timeout, args...)
}

// runAt runs an npm script of the SDK with PT_API_URL and PT_TOKEN set to
// url and token, and fails the test with its output when it fails.
func runAt(t *testing.T, url, token string, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(), "PT_API_URL="+url, "PT_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	t.Logf("npm %s:\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("npm %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// checkSummary fails the test unless node --test's closing summary says
// tests ran and every one passed: none failed, was cancelled, skipped or
// left todo (a skipped or todo test would otherwise pass unnoticed).
func checkSummary(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(out, "ℹ tests 0\n") || !strings.Contains(out, "ℹ pass ") {
		t.Errorf("node --test ran no test")
	}
	for _, want := range []string{"ℹ fail 0\n", "ℹ cancelled 0\n", "ℹ skipped 0\n", "ℹ todo 0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("node --test summary lacks %q: a test failed, was cancelled, skipped or left todo", strings.TrimSpace(want))
		}
	}
}

// TestE2E runs the SDK's end-to-end suites (test/e2e/*.test.mts).
func TestE2E(t *testing.T) {
	nodeReady(t)
	checkSummary(t, run(t, 20*time.Minute, "run", "--silent", "test:e2e"))
}

// TestProcesses runs the processes suite (test/e2e/processes.test.mts):
// background processes with streamed output, reconnect, stdin, signals
// and PTY resize over /v1/sandboxes/{id}/processes.
func TestProcesses(t *testing.T) {
	nodeReady(t)
	checkSummary(t, run(t, 10*time.Minute, "run", "--silent", "test:processes"))
}

// TestTemplates runs the custom templates suite (test/e2e/templates.test.mts):
// a Dockerfile build from an uploaded context followed through its log, the
// version it made, deletes refused in use, a failing RUN, registry
// credentials (docs/templates.md).
func TestTemplates(t *testing.T) {
	nodeReady(t)
	checkSummary(t, run(t, 10*time.Minute, "run", "--silent", "test:templates"))
}

// TestStartAdmission runs test/e2e/admission.test.mts against a ptd of its
// own whose host runs one start at a time and queues none, so a start that
// arrives while another is in flight is refused with a real 503 capacity
// (start_queue_full, Retry-After: 5), which the SDK retries.
func TestStartAdmission(t *testing.T) {
	nodeReady(t)
	d := ptdtest.StartAdmission(t, "")
	checkSummary(t, runAt(t, d.URL, d.Token, 10*time.Minute, "run", "--silent", "test:admission"))
}

// TestPackage packs the SDK and uses the tarball from an empty project.
func TestPackage(t *testing.T) {
	nodeReady(t)
	out := run(t, 10*time.Minute, "run", "--silent", "test:pack")
	for _, want := range []string{"import ok sbx_", "require ok sbx_", "types ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("pack smoke output lacks %q", want)
		}
	}
}
