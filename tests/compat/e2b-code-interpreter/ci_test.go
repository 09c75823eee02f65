// Package e2bcodeinterpreter runs the real @e2b/code-interpreter npm SDK
// (pinned in package.json / package-lock.json) with node --test, and the
// real e2b-code-interpreter Python SDK (pinned in requirements.txt) with
// pytest, against a real ptd, configured only by E2B_API_URL, E2B_SANDBOX_URL and
// E2B_API_KEY: Sandbox.create() (template code-interpreter-v1) and runCode
// reach the code-interpreter server in the sandbox through ptd's E2B port
// routing, unchanged.
package e2bcodeinterpreter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

var env struct {
	url, token string
	skip       string
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	root, err := filepath.Abs("../../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2b code interpreter:", err)
		return 1
	}
	env.skip = "code-interpreter SDK tests need root (they run real sandboxes)"
	return ptdtest.Main(m, "e2b code interpreter", ptdtest.Options{RepoRoot: root, ExtraArgs: []string{"--pids-limit", "512"}},
		func(d *ptdtest.Daemon) error {
			env.url, env.token, env.skip = d.URL, d.Token, ""
			// The template's first build takes minutes (Debian's scientific
			// stack); the SDK's create would not wait that long.
			return warmTemplate("code-interpreter")
		})
}

// warmTemplate creates and deletes one sandbox through /v1, which builds
// the template when it has no version yet.
func warmTemplate(slug string) error {
	body := strings.NewReader(`{"template":"` + slug + `"}`)
	req, _ := http.NewRequest("POST", env.url+"/v1/sandboxes?wait_for_state=running&wait_timeout_ms=1500000", body)
	req.Header.Set("Authorization", "Bearer "+env.token)
	resp, err := (&http.Client{Timeout: 26 * time.Minute}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 {
		return fmt.Errorf("warm %s: %d %s", slug, resp.StatusCode, b)
	}
	var sb struct{ ID string }
	json.Unmarshal(b, &sb)
	del, _ := http.NewRequest("DELETE", env.url+"/v1/sandboxes/"+sb.ID, nil)
	del.Header.Set("Authorization", "Bearer "+env.token)
	if r, err := http.DefaultClient.Do(del); err == nil {
		r.Body.Close()
	}
	return nil
}

// TestSDK runs every *.test.mjs here with node --test.
func TestSDK(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is required in CI (scripts/setup.sh installs it under PT_SETUP_TESTS=1)")
		}
		t.Skip("node is not installed")
	}
	if _, err := os.Stat("node_modules/@e2b/code-interpreter/package.json"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node_modules missing: run `npm ci` in tests/compat/e2b-code-interpreter (scripts/test.sh does)")
		}
		t.Skip("run `npm ci` in tests/compat/e2b-code-interpreter first")
	}
	files, _ := filepath.Glob("*.test.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--test", "--test-reporter=spec", "--test-concurrency=1"}, files...)...)
	cmd.Env = append(os.Environ(), "E2B_API_URL="+env.url, "E2B_SANDBOX_URL="+env.url, "E2B_API_KEY="+env.token, "E2B_DEBUG=")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test output:\n%s", out)
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
}

// TestPythonSDK runs the real `e2b-code-interpreter` Python SDK (pinned in
// requirements.txt, installed into .venv by scripts/test.sh) through the
// main cases with pytest, configured by the same variables.
func TestPythonSDK(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	py := filepath.Join(".venv", "bin", "python")
	if _, err := os.Stat(filepath.Join(".venv", "lib")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(".venv missing: run `python3 -m venv .venv && .venv/bin/pip install -r requirements.txt` in tests/compat/e2b-code-interpreter (scripts/test.sh does)")
		}
		t.Skip("make tests/compat/e2b-code-interpreter/.venv first (see scripts/test.sh)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_python_sdk.py")
	cmd.Env = append(os.Environ(), "E2B_API_URL="+env.url, "E2B_SANDBOX_URL="+env.url, "E2B_API_KEY="+env.token, "E2B_DEBUG=")
	out, err := cmd.CombinedOutput()
	t.Logf("pytest output:\n%s", out)
	if err != nil {
		t.Fatalf("pytest: %v", err)
	}
	if !strings.Contains(string(out), " passed") || strings.Contains(string(out), " skipped") {
		t.Errorf("pytest ran no test or skipped some")
	}
}
