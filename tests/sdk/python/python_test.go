// Package pythonsdk proves the Python SDK (sdk/python) against a real ptd:
// TestPytest runs the SDK's pytest suite, configured only by PT_API_URL and
// PT_TOKEN, in the virtual environment sdk/python/.venv (made here when
// missing: python3 -m venv, then pip install -e sdk/python[dev]).
package pythonsdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// env is the one ptd the suite talks to.
var env struct {
	url, token, previewURL string
	skip                   string
	root                   string
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	root, err := filepath.Abs("../../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "python sdk:", err)
		return 1
	}
	env.root = root
	env.skip = "the Python SDK tests need root (they run real sandboxes)"
	return ptdtest.Main(m, "python sdk", ptdtest.Options{RepoRoot: root, ExtraArgs: []string{"--pids-limit", "512"}},
		func(d *ptdtest.Daemon) error {
			env.url, env.token, env.previewURL, env.skip = d.URL, d.Token, d.PreviewURL, ""
			// Build the templates first: a first pt-base build (≈60 s), let
			// alone code-interpreter's (minutes), would outlast the waits the
			// tests ask for.
			for _, tpl := range []string{"busybox", "pt-base", "code-interpreter"} {
				if err := warmTemplate(tpl); err != nil {
					return err
				}
			}
			return nil
		})
}

// warmTemplate creates and deletes one sandbox, which builds the template
// when it has no version yet.
func warmTemplate(slug string) error {
	body := strings.NewReader(`{"template":"` + slug + `"}`)
	req, _ := http.NewRequest("POST", env.url+"/v1/sandboxes?wait_for_state=running&wait_timeout_ms=1500000", body)
	req.Header.Set("Authorization", "Bearer "+env.token)
	resp, err := http.DefaultClient.Do(req)
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

// missing fails in CI and skips elsewhere: CI must have every dependency.
func missing(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// venvPython returns sdk/python/.venv's python, making the venv (with the
// SDK installed editable and its pinned dev tools) when it is missing.
func venvPython(t *testing.T) string {
	t.Helper()
	sdk := filepath.Join(env.root, "sdk", "python")
	py := filepath.Join(sdk, ".venv", "bin", "python")
	check := exec.Command(py, "-c", "import platinum, pytest, pytest_asyncio")
	check.Dir = sdk
	if check.Run() == nil {
		return py
	}
	python3, err := exec.LookPath("python3")
	if err != nil {
		missing(t, "python3 is required (scripts/setup.sh installs it under PT_SETUP_TESTS=1)")
	}
	for _, args := range [][]string{
		{python3, "-m", "venv", filepath.Join(sdk, ".venv")},
		{py, "-m", "pip", "install", "-q", "-e", sdk + "[dev]"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = sdk
		if out, err := cmd.CombinedOutput(); err != nil {
			missing(t, fmt.Sprintf("%s: %v\n%s", strings.Join(args, " "), err, out))
		}
	}
	return py
}

// passed matches pytest's closing line, e.g. "=== 41 passed in 80.2s ===".
var passed = regexp.MustCompile(`(\d+) passed`)

// TestPytest runs sdk/python/tests against the daemon.
func TestPytest(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	py := venvPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-v", "-p", "no:cacheprovider", "tests")
	cmd.Dir = filepath.Join(env.root, "sdk", "python")
	cmd.Env = append(os.Environ(), "PT_API_URL="+env.url, "PT_TOKEN="+env.token, "PT_PREVIEW_URL="+env.previewURL,
		"PT_SDK_TESTS_REQUIRE_PTD=1")
	out, err := cmd.CombinedOutput()
	t.Logf("pytest output:\n%s", out)
	if err != nil {
		// Exit 5 (no tests collected) fails here too: any nonzero exit does.
		t.Fatalf("pytest: %v", err)
	}
	if m := passed.FindSubmatch(out); m == nil || string(m[1]) == "0" {
		t.Fatalf("pytest ran no test")
	}
	if strings.Contains(string(out), " skipped") {
		t.Errorf("pytest skipped tests against a real ptd")
	}
}
