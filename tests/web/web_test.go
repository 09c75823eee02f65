// Package webtest drives the dashboard (web/, docs/dashboard.md) in a real
// headless Chromium against a real ptd, and checks that the committed
// build web/dist is what `npm run build` makes from web/src.
package webtest

import (
	"context"
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
	"github.com/platinum-dev/platinum/internal/testenv"
)

var env struct {
	url, token string
	skip       string
	root       string
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	env.root, _ = ptdtest.RepoRoot()
	env.skip = "dashboard browser tests need root (they run real sandboxes)"
	return ptdtest.Main(m, "web", ptdtest.Options{}, func(d *ptdtest.Daemon) error {
		env.url, env.token, env.skip = d.URL, d.Token, ""
		return nil
	})
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestBuildUpToDate rebuilds the dashboard into a temp dir and compares it
// file by file with the committed web/dist, which ptd embeds.
func TestBuildUpToDate(t *testing.T) {
	_, err := exec.LookPath("npm")
	testenv.Require(t, err == nil, "npm is required (scripts/setup.sh installs node)")
	web := filepath.Join(env.root, "web")
	testenv.Require(t, exists(filepath.Join(web, "node_modules/vite/package.json")), "run `npm ci` in web/ first (scripts/test.sh does)")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "run", "build")
	cmd.Dir = web
	cmd.Env = append(os.Environ(), "PT_WEB_OUT_DIR="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm run build: %v\n%s", err, b)
	}
	want := tree(t, filepath.Join(web, "dist"))
	got := tree(t, out)
	for p, b := range got {
		if w, ok := want[p]; !ok {
			t.Errorf("web/dist lacks %s: rebuild with `npm run build` in web/ and commit dist/", p)
		} else if w != b {
			t.Errorf("web/dist/%s differs from a fresh build: rebuild and commit dist/", p)
		}
	}
	for p := range want {
		if _, ok := got[p]; !ok {
			t.Errorf("web/dist/%s is not made by the build any more: remove it", p)
		}
	}
}

func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		m[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBrowser runs dashboard.test.mjs (node --test, playwright-core pinned
// by package-lock.json) with Debian's chromium against the test's ptd.
// Screenshots of each view, at 1280x800 and at phone width, go to
// tests/web/artifacts/ (emptied first, ignored by git, left in place
// after the run), whose path the test logs.
func TestBrowser(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	node, err := exec.LookPath("node")
	testenv.Require(t, err == nil, "node is required (scripts/setup.sh installs it)")
	chromium := "/usr/bin/chromium"
	testenv.Require(t, exists(chromium), "chromium is required (scripts/setup.sh installs it under PT_SETUP_TESTS=1)")
	testenv.Require(t, exists("node_modules/playwright-core/package.json"), "run `npm ci` in tests/web first (scripts/test.sh does)")
	shots, err := filepath.Abs("artifacts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(shots); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", shots)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "--test-concurrency=1", "dashboard.test.mjs")
	cmd.Env = append(os.Environ(), "PT_URL="+env.url, "PT_TOKEN="+env.token, "PT_ARTIFACTS="+shots, "PT_CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test output:\n%s", out)
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
	if !regexp.MustCompile(`(?m)^\S*\s*pass [1-9]`).Match(out) {
		t.Fatal("node --test ran no test")
	}
	t.Logf("screenshots: %s", shots)
}

// TestServedByPtd checks the real ptd's listener: the dashboard at / and
// its assets with their cache headers and CSP, and the API surfaces next
// to it untouched.
func TestServedByPtd(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(env.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, index := get("/")
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-cache" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("GET / = %d, headers %v", resp.StatusCode, resp.Header)
	}
	asset := regexp.MustCompile(`src="(/assets/[^"]+\.js)"`).FindStringSubmatch(index)
	if asset == nil {
		t.Fatalf("index.html names no script:\n%s", index)
	}
	if resp, _ := get(asset[1]); resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" ||
		!strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
		t.Fatalf("GET %s = %d, headers %v", asset[1], resp.StatusCode, resp.Header)
	}
	for _, p := range []string{"/sandbox/sbx_01KABCDEFGHJKMNPQRSTVWXYZ0", "/sandbox/sbx_01KABCDEFGHJKMNPQRSTVWXYZ0/terminal",
		"/new", "/usage", "/template", "/template/busybox"} {
		if resp, body := get(p); resp.StatusCode != 200 || body != index {
			t.Fatalf("client route %s = %d, not index.html", p, resp.StatusCode)
		}
	}
	// The API surfaces answer as before: JSON, no dashboard headers.
	for _, tc := range []struct {
		path   string
		status int
	}{{"/healthz", 200}, {"/v1/sandboxes", 401}, {"/sandboxes", 401}, {"/daytona/api/sandbox", 401}, {"/v1/nope", 404}} {
		resp, body := get(tc.path)
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Security-Policy") != "" || strings.Contains(body, "<!doctype") {
			t.Errorf("GET %s = %d (want %d), CSP %q, body %.80q", tc.path, resp.StatusCode, tc.status,
				resp.Header.Get("Content-Security-Policy"), body)
		}
	}
}
