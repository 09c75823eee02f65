// Package e2bcodeinterpreter runs the real @e2b/code-interpreter npm SDK
// (pinned in package.json / package-lock.json) with node --test, and the
// real e2b-code-interpreter Python SDK (pinned in requirements.txt) with
// pytest, against a real ptd, configured only by E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY: Sandbox.create() (template
// code-interpreter-v1) and runCode reach the code-interpreter server in the
// sandbox through ptd's E2B port routing, unchanged. E2B's create cannot
// name a runtime class, so each suite runs twice: against the harness's ptd
// (--default-runtime runc) and against a second one whose default is
// gvisor.
package e2bcodeinterpreter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/runnercheck"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// daemon is one ptd the suites run against, by its default runtime class.
type daemon struct {
	runtime    string
	url, token string
}

var env struct {
	daemons []daemon
	skip    string
	// noGVisor says why there is no gvisor daemon (runsc missing outside
	// CI); empty when there is one.
	noGVisor string
}

// gvisorDaemon is the second ptd, stopped after the tests.
var gvisorDaemon *ptdtest.Daemon

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	env.skip = "code-interpreter SDK tests need root (they run real sandboxes)"
	// The template's first build takes minutes (Debian's scientific
	// stack); the SDK's create would not wait that long.
	opts := ptdtest.Options{ExtraArgs: []string{"--pids-limit", "512"}, Warm: []string{"code-interpreter"}}
	code := ptdtest.Main(m, "e2b code interpreter", opts, func(d *ptdtest.Daemon) error {
		env.skip = ""
		env.daemons = []daemon{{"runc", d.URL, d.Token}}
		if _, err := exec.LookPath("runsc"); err != nil {
			if os.Getenv("CI") == "true" {
				return fmt.Errorf("runsc is required in CI (scripts/setup.sh installs it)")
			}
			env.noGVisor = "runsc is not installed: the gvisor runs are skipped"
			return nil
		}
		o := opts
		o.ExtraArgs = append(append([]string(nil), opts.ExtraArgs...), "--default-runtime", "gvisor")
		g, err := ptdtest.Start(o)
		gvisorDaemon = g
		if err != nil {
			return fmt.Errorf("gvisor ptd: %w", err)
		}
		env.daemons = append(env.daemons, daemon{"gvisor", g.URL, g.Token})
		if err := g.Warm("code-interpreter"); err != nil {
			return fmt.Errorf("on gvisor: %w", err)
		}
		return nil
	})
	if err := gvisorDaemon.Stop(); err != nil {
		// Its reset failed or left its cgroup parent: the package fails,
		// as for Main's daemon.
		fmt.Fprintln(os.Stderr, "e2b code interpreter: gvisor ptd:", err)
		code = max(code, 1)
	}
	return code
}

// eachRuntime runs f once per daemon, as a subtest named by its runtime
// class, and then checks that every sandbox the SDK made there ran on that
// class (E2B's create names none: the daemon's default decides).
func eachRuntime(t *testing.T, f func(t *testing.T, d daemon)) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	for _, d := range env.daemons {
		t.Run(d.runtime, func(t *testing.T) {
			before := sandboxIDs(t, d)
			f(t, d)
			made := 0
			for id, rt := range sandboxIDs(t, d) {
				if _, old := before[id]; old {
					continue
				}
				made++
				if rt != d.runtime {
					t.Errorf("sandbox %s ran on %q, want %s", id, rt, d.runtime)
				}
			}
			if made == 0 {
				t.Errorf("the suite made no sandbox on %s", d.runtime)
			}
		})
	}
	if env.noGVisor != "" {
		t.Run("gvisor", func(t *testing.T) { t.Skip(env.noGVisor) })
	}
}

// sandboxIDs returns every sandbox of the daemon (deleted ones too) and
// its runtime class.
func sandboxIDs(t *testing.T, d daemon) map[string]string {
	t.Helper()
	req, _ := http.NewRequest("GET", d.url+"/v1/sandboxes?include=destroyed,failed&limit=200", nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Rows []struct {
			ID      string `json:"id"`
			Runtime string `json:"runtime"`
		} `json:"rows"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("list sandboxes: %d %v", resp.StatusCode, err)
	}
	out := map[string]string{}
	for _, r := range list.Rows {
		out[r.ID] = r.Runtime
	}
	return out
}

// sdkEnv is the environment the SDKs get: the E2B variables only.
func sdkEnv(d daemon) []string {
	return append(os.Environ(), "E2B_API_URL="+d.url, "E2B_SANDBOX_URL="+d.url, "E2B_API_KEY="+d.token, "E2B_DEBUG=",
		"PT_EXPECT_RUNTIME="+d.runtime)
}

// TestSDK runs every *.test.mjs here with node --test, on each runtime
// class; every test must pass, none may skip.
func TestSDK(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	node := testenv.RequiresNode(t, ".", "@e2b/code-interpreter")
	files, _ := filepath.Glob("*.test.mjs")
	eachRuntime(t, func(t *testing.T, d daemon) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{"--test", "--test-reporter=spec", "--test-concurrency=1"}, files...)...)
		cmd.Env = sdkEnv(d)
		runnercheck.Run(t, "node --test", cmd, runnercheck.NodeTest)
	})
}

// TestPythonSDK runs the real `e2b-code-interpreter` Python SDK (pinned in
// requirements.txt, installed into .venv by scripts/test.sh) through the
// main cases with pytest, configured by the same variables, on each
// runtime class; every test must pass, none may skip.
func TestPythonSDK(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	py := testenv.RequiresVenv(t, ".")
	eachRuntime(t, func(t *testing.T, d daemon) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_python_sdk.py")
		cmd.Env = sdkEnv(d)
		runnercheck.Run(t, "pytest", cmd, runnercheck.Pytest)
	})
}
