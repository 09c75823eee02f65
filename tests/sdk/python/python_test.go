// Package pythonsdk proves the Python SDK (sdk/python) against a real ptd:
// TestPytest runs the SDK's pytest suite, configured only by PT_API_URL and
// PT_TOKEN, in the virtual environment sdk/python/.venv (made here when
// missing: python3 -m venv, then pip install -e sdk/python[dev]);
// TestStartAdmission runs its start-admission tests against a second ptd
// with one start slot; TestPipInstall installs the package the way a user
// does (pip install ./sdk/python, not editable) into a fresh venv.
package pythonsdk

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// env is the one ptd the suite talks to.
var env struct {
	url, token, previewURL string
	skip                   string
	root                   string
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	env.root, _ = ptdtest.RepoRoot()
	env.skip = "the Python SDK tests need root (they run real sandboxes)"
	// The templates are built first: a first pt-base build (≈60 s), let
	// alone code-interpreter's (minutes), would outlast the waits the tests
	// ask for.
	o := ptdtest.Options{ExtraArgs: []string{"--pids-limit", "512"}, Warm: []string{"busybox", "pt-base", "code-interpreter"}}
	return ptdtest.Main(m, "python sdk", o, func(d *ptdtest.Daemon) error {
		env.url, env.token, env.previewURL, env.skip = d.URL, d.Token, d.PreviewURL, ""
		return nil
	})
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
		testenv.Require(t, false, "python3 is required (scripts/setup.sh installs it under PT_SETUP_TESTS=1)")
	}
	for _, args := range [][]string{
		{python3, "-m", "venv", filepath.Join(sdk, ".venv")},
		{py, "-m", "pip", "install", "-q", "-e", sdk + "[dev]"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = sdk
		if out, err := cmd.CombinedOutput(); err != nil {
			testenv.Require(t, false, fmt.Sprintf("%s: %v\n%s", strings.Join(args, " "), err, out))
		}
	}
	return py
}

// passed matches pytest's closing line, e.g. "=== 41 passed in 80.2s ===".
var passed = regexp.MustCompile(`(\d+) passed`)

// pytest runs the SDK's suite with args against the ptd at url, and fails
// the test unless tests ran and none failed or was skipped.
func pytest(t *testing.T, url, token, previewURL string, extraEnv []string, args ...string) {
	t.Helper()
	py := venvPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{"-m", "pytest", "-v", "-p", "no:cacheprovider"}, args...)...)
	cmd.Dir = filepath.Join(env.root, "sdk", "python")
	cmd.Env = append(append(os.Environ(), "PT_API_URL="+url, "PT_TOKEN="+token, "PT_PREVIEW_URL="+previewURL,
		"PT_SDK_TESTS_REQUIRE_PTD=1"), extraEnv...)
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

// TestPytest runs sdk/python/tests against the daemon (all but the
// start-admission tests, which need a ptd of their own).
func TestPytest(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	pytest(t, env.url, env.token, env.previewURL, nil, "-m", "not admission", "tests")
}

// TestStartAdmission runs the tests marked admission (tests/test_admission.py)
// against a second ptd whose host runs one start at a time and queues none,
// so a start that arrives while another is in flight is refused with a real
// 503 capacity (start_queue_full, Retry-After: 5), which the client retries.
func TestStartAdmission(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	d := ptdtest.StartAdmission(t, env.root)
	pytest(t, d.URL, d.Token, d.PreviewURL, []string{"PT_SDK_ADMISSION=1"}, "-m", "admission", "tests")
}

// TestPipInstall installs sdk/python the way its README says, with plain
// `pip install ./sdk/python` (a wheel built by the pyproject's backend, not
// an editable install), into a fresh venv, and checks what a user gets:
// the package imports from site-packages, ships py.typed (so mypy --strict
// type-checks code against it rather than rejecting an untyped import),
// pulls in its runtime dependency, and runs a sandbox against ptd.
func TestPipInstall(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	python3, err := exec.LookPath("python3")
	if err != nil {
		testenv.Require(t, false, "python3 is required (scripts/setup.sh installs it under PT_SETUP_TESTS=1)")
	}
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	py := filepath.Join(venv, "bin", "python")
	sdk := filepath.Join(env.root, "sdk", "python")
	for _, args := range [][]string{
		{python3, "-m", "venv", venv},
		{py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "./sdk/python"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = env.root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Outside the checkout, so only the installed package can be imported.
	script := `
import importlib.metadata, json, os, pathlib
import httpx, platinum
from platinum import Platinum
pkg = pathlib.Path(platinum.__file__).parent
c = Platinum()
s = c.sandboxes.create(template="busybox", wait_for_running=True, timeout=300)
r = s.exec(["echo", "installed"])
s.delete()
print(json.dumps({"file": platinum.__file__, "typed": (pkg / "py.typed").is_file(),
                  "version": platinum.__version__, "dist": importlib.metadata.version("platinum"),
                  "stdout": r.stdout, "direct_url": importlib.metadata.distribution("platinum").read_text("direct_url.json")}))
`
	cmd := exec.Command(py, "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PT_API_URL="+env.url, "PT_TOKEN="+env.token, "PYTHONPATH=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the installed package: %v\n%s", err, out)
	}
	var got struct {
		File, Version, Dist, Stdout string
		DirectURL                   string `json:"direct_url"`
		Typed                       bool
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	site := filepath.Join(venv, "lib")
	if !strings.HasPrefix(got.File, site) || strings.HasPrefix(got.File, sdk) {
		t.Errorf("platinum imported from %s, want the venv's site-packages under %s", got.File, site)
	}
	if strings.Contains(got.DirectURL, `"editable": true`) {
		t.Errorf("pip made an editable install: %s", got.DirectURL)
	}
	if !got.Typed {
		t.Errorf("the installed package has no py.typed")
	}
	if got.Version != got.Dist || got.Version == "" {
		t.Errorf("platinum.__version__ %q, installed distribution %q", got.Version, got.Dist)
	}
	if got.Stdout != "installed\n" {
		t.Errorf("exec through the installed package printed %q", got.Stdout)
	}

	// py.typed at work: mypy --strict (the dev venv's) checks code against
	// the installed package, which it would refuse as untyped without it,
	// and catches a wrong use of its types.
	mypy := filepath.Join(sdk, ".venv", "bin", "mypy")
	venvPython(t) // makes the dev venv (and its mypy) when missing
	good := filepath.Join(dir, "good.py")
	bad := filepath.Join(dir, "bad.py")
	for file, src := range map[string]string{
		good: "from platinum import Platinum, Sandbox\n\ndef f(c: Platinum) -> str:\n    s: Sandbox = c.sandboxes.get(\"sbx_x\")\n    return s.state\n",
		bad:  "from platinum import Platinum\n\ndef f(c: Platinum) -> int:\n    return c.sandboxes.get(\"sbx_x\").state\n",
	} {
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(file string) (string, error) {
		cmd := exec.Command(mypy, "--strict", "--no-incremental", "--python-executable", py, file)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := check(good); err != nil {
		t.Errorf("mypy --strict on code using the installed package: %v\n%s", err, out)
	}
	if out, err := check(bad); err == nil || !strings.Contains(out, "Incompatible return value type") {
		t.Errorf("mypy --strict accepted returning a str as int (no types from the installed package?): %v\n%s", err, out)
	}
}
