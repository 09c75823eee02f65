package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

// result is what one pt invocation produced.
type result struct {
	code           int
	stdout, stderr string
}

// ptd runs pt against a real in-process ptd (platinumtest).
func ptd(t *testing.T, srv *platinumtest.Server, args ...string) result {
	t.Helper()
	return runPT(t, srv.URL, platinumtest.Token, "", nil, args...)
}

// ptdRun is ptd with stdin and env (which overrides PT_API_URL and
// PT_TOKEN; an empty value unsets).
func ptdRun(t *testing.T, srv *platinumtest.Server, stdin string, env map[string]string, args ...string) result {
	t.Helper()
	return runPT(t, srv.URL, platinumtest.Token, stdin, env, args...)
}

// runPT runs pt with PT_API_URL and PT_TOKEN set to url and token.
func runPT(t *testing.T, url, token, stdin string, env map[string]string, args ...string) result {
	t.Helper()
	vars := map[string]string{"PT_API_URL": url, "PT_TOKEN": token}
	for k, v := range env {
		vars[k] = v
	}
	var stdout, stderr strings.Builder
	a := &app{
		stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(stdin),
		getenv:       func(k string) string { return vars[k] },
		pollInterval: time.Millisecond,
	}
	code := a.run(t.Context(), args)
	return result{code, stdout.String(), stderr.String()}
}

// created reads the sandbox pt printed (its first line, "ID: sbx_…", or
// the "id" of its JSON) from ptd's store.
func created(t *testing.T, srv *platinumtest.Server, stdout string) sandbox.Sandbox {
	t.Helper()
	id := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(stdout, "\n", 2)[0], "ID:"))
	var js struct{ ID string }
	if json.Unmarshal([]byte(stdout), &js) == nil && js.ID != "" {
		id = js.ID
	}
	sb, ok := srv.Sandbox(id)
	if !ok {
		t.Fatalf("no sandbox %q in ptd's store; stdout %q", id, stdout)
	}
	return sb
}

func TestSandboxCreate(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	// The guide's example (docs/sandboxes.md), verbatim.
	r := ptd(t, srv, "sandbox", "create", "-t", "pt-base", "--cpu", "2", "--ram", "1024")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	sb := created(t, srv, r.stdout)
	want := strings.Join([]string{
		"ID:         " + sb.ID,
		"Name:       -",
		"State:      running",
		"Status:     ready",
		"Template:   pt-base (" + sb.TemplateVersionID + ")",
		"CPU:        2",
		"RAM:        1024 MB",
		"Disk:       2 GB",
		"Type:       persistent",
		"Timers:     stop after 60 min idle, archive 7 days after stop, never delete",
		"Env keys:   -",
		"Metadata:   -",
		"Host:       host_test",
		"Created:    " + sb.CreatedAt.UTC().Format(time.RFC3339),
		"Updated:    " + sb.UpdatedAt.UTC().Format(time.RFC3339),
		"",
	}, "\n")
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	// The test host builds at once; pt shows the build only if it read the
	// template while the build ran, and then only template lines.
	for _, line := range strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n") {
		if line != "" && !strings.HasPrefix(line, "template pt-base: ") {
			t.Errorf("stderr line %q, want only the template's build", line)
		}
	}
	if srv.Creates() != 1 || sb.CPU != 2 || sb.RAMMB != 1024 {
		t.Errorf("server: %d creates, sandbox %+v", srv.Creates(), sb)
	}
}

func TestSandboxCreateJSONAndFields(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	r := ptd(t, srv, "sandbox", "create", "--template", "busybox", "--name", "ci", "--disk", "3",
		"--env", "A=1", "--env", "B=x=y", "--metadata", "team=infra", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	sb := created(t, srv, r.stdout)
	want := map[string]any{
		"id": sb.ID, "name": "ci", "state": "running", "template": "busybox",
		"template_version_id": sb.TemplateVersionID, "cpu": 1.0, "ram_mb": 512.0, "disk_gb": 3.0,
		"env_keys": []any{"A", "B"}, "metadata": map[string]any{"team": "infra"}, "host_id": "host_test",
		"created_at": got["created_at"], "updated_at": got["updated_at"],
		"type": "persistent", "auto_stop_minutes": 60.0, "auto_archive_days": 7.0, "auto_delete_days": 0.0, "auto_resume": true,
	}
	// Times keep the API's six fractional digits.
	for _, k := range []string{"created_at", "updated_at"} {
		if s, _ := got[k].(string); len(s) != len("2026-11-29T15:04:05.123456Z") || !strings.HasSuffix(s, "Z") {
			t.Errorf("%s = %q", k, got[k])
		}
	}
	// ptd answers more than pt needs; these are the fields pt promises.
	for k := range got {
		if _, ok := want[k]; !ok {
			delete(got, k)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"A": "1", "B": "x=y"}, sb.Env); diff != "" {
		t.Errorf("env sent (-want +got):\n%s", diff)
	}
}

func TestSandboxCreateShowsBuildProgress(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	// busybox is not built: the first sandbox waits for its build, whose
	// progress ptd keeps (at most every 300ms) and pt shows.
	srv.Host.BuildFunc = slowBuild(200<<20, "debootstrap: resolving dependencies", "packing rootfs")
	r := ptd(t, srv, "sandbox", "create", "-t", "busybox")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	// The "ready" line shows only when pt reads the template between the
	// build's end and the sandbox's start, which ptd makes immediate.
	if sb := created(t, srv, r.stdout); sb.TemplateVersionID == "" {
		t.Errorf("sandbox %s has no template version", sb.ID)
	}
	for _, want := range []string{
		"template busybox: building: debootstrap: resolving dependencies\n",
		"template busybox: building: packing rootfs\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
	if !strings.Contains(r.stdout, "State:      running") {
		t.Errorf("stdout = %q", r.stdout)
	}
}

func TestSandboxCreateNoWait(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	r := ptd(t, srv, "sandbox", "create", "-t", "busybox", "--no-wait", "--json")
	var got struct{ ID, State string }
	if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil || got.State != "creating" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if want := []string{"POST /v1/sandboxes"}; !slices.Equal(srv.Requests(), want) {
		t.Errorf("requests = %q, want %q", srv.Requests(), want)
	}
}

func TestSandboxCreateFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		setup      func(*platinumtest.Server)
		args       []string
		wantCode   int
		wantStderr []string
	}{
		{"sandbox fails", func(s *platinumtest.Server) {
			s.Host.StartFunc = func(context.Context, hostapi.StartSpec) (hostapi.Instance, error) {
				return hostapi.Instance{}, errors.New("no space on host")
			}
		},
			[]string{"-t", "busybox"}, 1, []string{"pt: sandbox sbx_", " is failed, not running: ", "no space on host\n", "hint: see the sandbox with `pt sandbox get sbx_"}},
		{"wait runs out", func(s *platinumtest.Server) {
			s.Host.StartFunc = func(ctx context.Context, _ hostapi.StartSpec) (hostapi.Instance, error) {
				<-ctx.Done() // starts until the server closes
				return hostapi.Instance{}, ctx.Err()
			}
		},
			[]string{"-t", "busybox", "--timeout", "20ms"}, 1, []string{"pt: sandbox sbx_", " is still creating after 20ms\n", "hint: it keeps starting in the background: check it with `pt sandbox get sbx_"}},
		{"unknown template", nil, []string{"-t", "nope"}, 1, []string{"pt: template \"nope\": not found\n", "hint: see the available templates with `pt template list`\n"}},
		{"bad value", nil, []string{"-t", "busybox", "--ram", "64"}, 1, []string{"pt: ram_mb: must be between 128 and 262144\n", "hint: check the value of --ram"}},
		{"no template", nil, []string{"--cpu", "1"}, 2, []string{"pt: --template is required", "usage: pt sandbox create"}},
		{"bad env", nil, []string{"-t", "busybox", "--env", "NOEQUALS"}, 2, []string{`want KEY=VALUE, got "NOEQUALS"`}},
		{"unknown flag", nil, []string{"-t", "busybox", "--gpus", "1"}, 2, []string{"flag provided but not defined: -gpus"}},
		{"stray argument", nil, []string{"-t", "busybox", "extra"}, 2, []string{`unexpected argument "extra"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := platinumtest.NewServer(t)
			if tt.setup != nil {
				tt.setup(srv)
			}
			r := ptd(t, srv, append([]string{"sandbox", "create"}, tt.args...)...)
			if r.code != tt.wantCode || r.stdout != "" {
				t.Errorf("exit %d stdout %q, want exit %d and no output", r.code, r.stdout, tt.wantCode)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q lacks %q", r.stderr, w)
				}
			}
			if tt.wantCode == 2 && srv.Creates() != 0 {
				t.Error("a usage error created a sandbox")
			}
		})
	}
}

func TestSandboxListGetRm(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	a := created(t, srv, ptd(t, srv, "sandbox", "create", "-t", "busybox", "--name", "web", "--cpu", "0.5", "--ram", "256", "--disk", "4", "--type", "dev").stdout).ID
	b := created(t, srv, ptd(t, srv, "sandbox", "create", "-t", "pt-base", "--cpu", "2", "--ram", "1024").stdout).ID
	if r := ptd(t, srv, "sandbox", "stop", b, "--wait"); r.code != 0 {
		t.Fatalf("stop: exit %d stderr %q", r.code, r.stderr)
	}
	createdAt := func(id string) string {
		sb, _ := srv.Sandbox(id)
		return sb.CreatedAt.UTC().Format(time.RFC3339)
	}

	r := ptd(t, srv, "sandbox", "list")
	want := "" +
		"ID                               NAME   STATE     TYPE         TEMPLATE   CPU   RAM      DISK   CREATED\n" +
		b + "   -      stopped   persistent   pt-base    2     1024MB   2GB    " + createdAt(b) + "\n" +
		a + "   web    running   dev          busybox    0.5   256MB    4GB    " + createdAt(a) + "\n"
	if diff := cmp.Diff(want, r.stdout); r.code != 0 || diff != "" {
		t.Errorf("list: exit %d stderr %q; stdout (-want +got):\n%s", r.code, r.stderr, diff)
	}

	// The guide's example (docs/sandboxes.md), verbatim.
	r = ptd(t, srv, "sandbox", "list", "--state", "running", "--limit", "100")
	if r.code != 0 || !strings.Contains(r.stdout, a) || strings.Contains(r.stdout, b) {
		t.Errorf("list --state running: exit %d stdout %q", r.code, r.stdout)
	}
	if last := srv.Requests()[len(srv.Requests())-1]; last != "GET /v1/sandboxes?limit=100&paginated=true&state=running" {
		t.Errorf("request = %q", last)
	}

	r = ptd(t, srv, "sandbox", "list", "--limit", "1", "--json")
	var page struct {
		Rows []struct {
			ID string `json:"id"`
		} `json:"rows"`
		Total int `json:"total"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Rows) != 1 || page.Rows[0].ID != b || page.Total != 2 {
		t.Errorf("list --json = %q (%v)", r.stdout, err)
	}
	r = ptd(t, srv, "sandbox", "list", "--limit", "1")
	if r.stderr != "showing 1-1 of 2; see more with --offset 1\n" {
		t.Errorf("list --limit 1 stderr = %q", r.stderr)
	}

	r = ptd(t, srv, "sandbox", "get", a, "--json") // flags may follow the ID
	var got struct{ ID, Name, State string }
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got != (struct{ ID, Name, State string }{a, "web", "running"}) {
		t.Errorf("get --json = %q (%v)", r.stdout, err)
	}

	r = ptd(t, srv, "sandbox", "rm", a, "sbx_missing", b)
	if r.code != 1 || r.stdout != a+"\n"+b+"\n" {
		t.Errorf("rm: exit %d stdout %q", r.code, r.stdout)
	}
	wantErr := "pt: sbx_missing: sandbox \"sbx_missing\": not found\npt: could not delete sbx_missing\nhint: list your sandboxes with `pt sandbox list`\n"
	if r.stderr != wantErr {
		t.Errorf("rm stderr = %q, want %q", r.stderr, wantErr)
	}
	r = ptd(t, srv, "sandbox", "get", a)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "pt: sandbox \""+a+"\" was deleted: not found\nhint: list your sandboxes with `pt sandbox list`\nrequest id: req_") {
		t.Errorf("get deleted: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestSandboxExec(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	id := created(t, srv, ptd(t, srv, "sandbox", "create", "-t", "busybox").stdout).ID
	stopped := created(t, srv, ptd(t, srv, "sandbox", "create", "-t", "busybox").stdout).ID
	if r := ptd(t, srv, "sandbox", "stop", stopped, "--wait"); r.code != 0 {
		t.Fatalf("stop: exit %d stderr %q", r.code, r.stderr)
	}
	tests := []struct {
		name                   string
		stdin                  string
		args                   []string
		wantCode               int
		wantStdout, wantStderr string
	}{
		{"argv with flags before --", "", []string{id, "--env", "K=v", "--cwd", "/tmp", "--timeout", "2s", "--", "sh", "-c", `printf '%s|%s|%s' "$*" "$PWD" "$K"`, "sh", "-la", "--json"}, 0,
			"-la --json|/tmp|v", ""},
		{"shell", "", []string{id, "--shell", "echo shell | tr a-z A-Z"}, 0, "SHELL\n", ""},
		{"stdin", "piped", []string{id, "-i", "--", "cat"}, 0, "piped", ""},
		{"exit code and both streams", "", []string{id, "--", "sh", "-c", "echo out; echo err >&2; exit 3"}, 3, "out\n", "err\n"},
		{"timed out", "", []string{id, "--timeout", "1s", "--", "sleep", "60"}, 124, "", "pt: the command timed out after 1s and was killed; raise --timeout\n"},
		{"killed", "", []string{id, "--", "sh", "-c", "kill -9 $$"}, 137, "", "pt: the command was killed by a signal\n"},
		{"not running", "", []string{stopped, "--", "ls"}, 1, "", "pt: sandbox is stopped; it must be running (wait with ?wait_for_state=running, or start it)\nhint: the sandbox is stopped; it must be running: start it with `pt sandbox start ID --wait`\n"},
		{"no command", "", []string{id}, 2, "", "pt: no command given: put it after --"},
		{"no sandbox", "", nil, 2, "", "pt: want a sandbox ID and a command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ptdRun(t, srv, tt.stdin, nil, append([]string{"sandbox", "exec"}, tt.args...)...)
			if r.code != tt.wantCode || r.stdout != tt.wantStdout || !strings.HasPrefix(r.stderr, tt.wantStderr) {
				t.Errorf("exit %d stdout %q stderr %q; want %d %q %q", r.code, r.stdout, r.stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func TestSandboxCp(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	id := created(t, srv, ptd(t, srv, "sandbox", "create", "-t", "busybox").stdout).ID
	dir := t.TempDir()
	local := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(local, []byte("from disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The sandboxes of platinumtest share the test machine's filesystem:
	// the sandbox's side lives in a directory of its own.
	box := t.TempDir()
	if err := os.MkdirAll(filepath.Join(box, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(box, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(box, "etc", "motd"), []byte("hello from the sandbox"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := func(p string) []byte {
		b, _ := os.ReadFile(filepath.Join(box, p))
		return b
	}

	tests := []struct {
		name       string
		stdin      string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
		check      func(t *testing.T)
	}{
		{"upload a file", "", []string{local, id + ":" + box + "/work/a.txt"}, 0, "", "", func(t *testing.T) {
			if b := file("/work/a.txt"); string(b) != "from disk" {
				t.Errorf("sandbox has %q", b)
			}
		}},
		{"upload into a directory keeps the name", "", []string{local, id + ":" + box + "/work/"}, 0, "", "", func(t *testing.T) {
			if b := file("/work/in.txt"); string(b) != "from disk" {
				t.Errorf("sandbox has %q", b)
			}
		}},
		{"upload stdin", "piped data", []string{"-", id + ":" + box + "/work/stdin.txt"}, 0, "", "", func(t *testing.T) {
			if b := file("/work/stdin.txt"); string(b) != "piped data" {
				t.Errorf("sandbox has %q", b)
			}
		}},
		{"download to stdout", "", []string{id + ":" + box + "/etc/motd", "-"}, 0, "hello from the sandbox", "", nil},
		{"download to a file", "", []string{id + ":" + box + "/etc/motd", filepath.Join(dir, "out.txt")}, 0, "", "", func(t *testing.T) {
			if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(b) != "hello from the sandbox" {
				t.Errorf("local file = %q, %v", b, err)
			}
		}},
		{"download into a directory", "", []string{id + ":" + box + "/etc/motd", dir}, 0, "", "", func(t *testing.T) {
			if b, err := os.ReadFile(filepath.Join(dir, "motd")); err != nil || string(b) != "hello from the sandbox" {
				t.Errorf("local file = %q, %v", b, err)
			}
		}},
		{"download missing leaves nothing", "", []string{id + ":" + box + "/nope", filepath.Join(dir, "nope")}, 1, "", "pt: agent stat " + box + "/nope: lstat " + box + "/nope: no such file or directory: not found\n", func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, "nope")); !os.IsNotExist(err) {
				t.Errorf("a file was left behind: %v", err)
			}
		}},
		{"download a directory", "", []string{id + ":" + box + "/etc", "-"}, 1, "", "pt: " + box + "/etc in " + id + " is a directory\nhint: pt copies single files", nil},
		{"upload a directory", "", []string{dir, id + ":" + box + "/x"}, 1, "", "pt: " + dir + " is a directory\n", nil},
		{"stdin needs a name", "", []string{"-", id + ":" + box + "/work/"}, 2, "", "pt: name the file to write in the sandbox", nil},
		{"both local", "", []string{local, filepath.Join(dir, "b")}, 2, "", "pt: one side must be in a sandbox, written ID:PATH", nil},
		{"both remote", "", []string{id + ":" + box + "/a", id + ":" + box + "/b"}, 2, "", "pt: copying between sandboxes is not supported", nil},
		{"one argument", "", []string{local}, 2, "", "pt: want a source and a destination", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ptdRun(t, srv, tt.stdin, nil, append([]string{"sandbox", "cp"}, tt.args...)...)
			if r.code != tt.wantCode || r.stdout != tt.wantStdout || !strings.HasPrefix(r.stderr, tt.wantStderr) {
				t.Errorf("exit %d stdout %q stderr %q; want %d %q %q", r.code, r.stdout, r.stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if tt.check != nil {
				tt.check(t)
			}
		})
	}
	// Nothing but the copies themselves may be left in the directory.
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"in.txt", "motd", "out.txt"}; !slices.Equal(names, want) {
		t.Errorf("local dir holds %q, want %q", names, want)
	}
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	if r := ptd(t, srv, "template", "build", "busybox", "--wait"); r.code != 0 {
		t.Fatalf("build busybox: exit %d stderr %q", r.code, r.stderr)
	}
	r := ptd(t, srv, "template", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || !slices.Equal(strings.Fields(lines[0]), []string{"SLUG", "STATUS", "VERSION", "SIZE", "CREATED", "DETAIL"}) ||
		!slices.Equal(strings.Fields(lines[2]), []string{"pt-base", "not_built", "-", "-", "-", "-"}) ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "busybox ready tplv_") {
		t.Errorf("template list: exit %d\n%s", r.code, r.stdout)
	}
	r = ptd(t, srv, "template", "list", "--json")
	var page struct {
		Rows []struct {
			Slug   string `json:"slug"`
			Status string `json:"status"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Rows) != 2 || page.Rows[1].Slug != "pt-base" || page.Rows[1].Status != "not_built" {
		t.Errorf("template list --json = %q (%v)", r.stdout, err)
	}

	// ptd keeps a build's progress at most every 300ms: each line here
	// stays long enough to be seen.
	srv.Host.BuildFunc = slowBuild(1, "one", "two")
	r = ptd(t, srv, "template", "build", "pt-base", "--wait")
	if r.code != 0 || !strings.Contains(r.stderr, "template pt-base: building: one\ntemplate pt-base: building: two\n") ||
		!strings.Contains(r.stderr, "template pt-base: ready (") || !strings.HasPrefix(r.stdout, "template pt-base: ready tplv_") {
		t.Errorf("build --wait: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = ptd(t, srv, "template", "build", "busybox")
	if r.code != 0 || r.stdout != "template busybox: building\n" {
		t.Errorf("build: exit %d stdout %q", r.code, r.stdout)
	}
	r = ptd(t, srv, "template", "build", "nope")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "pt: template \"nope\": not found\n") {
		t.Errorf("build nope: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestOrgCreate(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	r := ptd(t, srv, "org", "create", "acme")
	if r.code != 1 || !strings.Contains(r.stderr, "hint: this token may not do that; creating organizations needs the admin token") {
		t.Errorf("as a normal token: exit %d stderr %q", r.code, r.stderr)
	}
	admin := map[string]string{"PT_TOKEN": platinumtest.AdminToken}
	r = ptdRun(t, srv, "", admin, "org", "create", "acme", "--json")
	var got struct {
		Org struct {
			ID, Name  string
			CreatedAt string `json:"created_at"`
		} `json:"org"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil || got.Org.Name != "acme" || !strings.HasPrefix(got.Org.ID, "org_") || !strings.HasPrefix(got.Token, "pt_") || got.Org.CreatedAt == "" {
		t.Errorf("org create --json: exit %d stdout %q (%v)", r.code, r.stdout, err)
	}
	r = ptdRun(t, srv, "", admin, "org", "create", "beta")
	if r.code != 0 || !strings.Contains(r.stdout, "Token:   pt_") || !strings.Contains(r.stderr, "not shown again") {
		t.Errorf("org create: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestConfigAndConnectionErrors(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name       string
		env        map[string]string
		wantStderr string
	}{
		{"wrong token", map[string]string{"PT_TOKEN": "bogus"},
			"pt: missing or unknown token: send Authorization: Bearer $PT_TOKEN\nhint: " + tokenHint + "\nrequest id: req_"},
		{"no token", map[string]string{"PT_TOKEN": ""},
			"pt: PT_TOKEN is not set\nhint: " + tokenHint + "\n"},
		{"bad URL", map[string]string{"PT_API_URL": "localhost:7070"},
			"pt: PT_API_URL \"localhost:7070\": want an http:// or https:// URL such as http://127.0.0.1:7070\nhint: set PT_API_URL to ptd's address, e.g. http://127.0.0.1:7070\n"},
		{"ptd not running", map[string]string{"PT_API_URL": closed.URL},
			"pt: cannot reach ptd at " + strings.TrimPrefix(closed.URL, "http://") + ": connection refused\nhint: is ptd running? start it with `scripts/ptd-up.sh` or `ptd serve` (pt looked for it at " + closed.URL + "; set PT_API_URL if it listens elsewhere)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ptdRun(t, srv, "", tt.env, "sandbox", "list")
			// ptd's answers end with their request id, which varies.
			sameStderr := r.stderr == tt.wantStderr || strings.HasSuffix(tt.wantStderr, "req_") && strings.HasPrefix(r.stderr, tt.wantStderr)
			if r.code != 1 || r.stdout != "" || !sameStderr {
				t.Errorf("exit %d stdout %q\nstderr %q\nwant   %q", r.code, r.stdout, r.stderr, tt.wantStderr)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	tests := []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{nil, 2, "", "pt: no command given\n\npt is the Platinum command-line client."},
		{[]string{"bogus"}, 2, "", `pt: unknown command "bogus"`},
		{[]string{"sandbox"}, 2, "", "pt: pt sandbox needs a subcommand"},
		{[]string{"sandbox", "frob"}, 2, "", `pt: unknown command "sandbox frob"`},
		{[]string{"sandbox", "get"}, 2, "", "pt: want exactly one sandbox ID\n\nusage: pt sandbox get ID [--json]"},
		{[]string{"sandbox", "list", "--limit", "x"}, 2, "", `pt: invalid value "x" for flag -limit`},
		{[]string{"sandbox", "rm"}, 2, "", "pt: want at least one sandbox ID"},
		{[]string{"sandbox", "ps"}, 2, "", "pt: want exactly one sandbox ID\n\nusage: pt sandbox ps ID [--json]"},
		{[]string{"sandbox", "kill-process", "sbx_1"}, 2, "", "pt: want a sandbox ID and a PID\n\nusage: pt sandbox kill-process ID PID [--signal SIGNAL]"},
		{[]string{"sandbox", "kill-process", "sbx_1", "x"}, 2, "", `pt: PID "x" is not a positive number (see pt sandbox ps sbx_1)`},
		{[]string{"template", "build"}, 2, "", "pt: want exactly one template SLUG"},
		{[]string{"org", "create"}, 2, "", "pt: want exactly one organization NAME"},
		{[]string{"--help"}, 0, "pt is the Platinum command-line client.", ""},
		{[]string{"sandbox", "exec", "--help"}, 0, "usage: pt sandbox exec ID", ""},
		{[]string{"version"}, 0, "pt dev (sdk ", ""},
		{[]string{"sbx", "ls", "--json"}, 0, `{`, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := ptd(t, srv, tt.args...)
			if r.code != tt.wantCode || !strings.HasPrefix(r.stdout, tt.wantStdout) || !strings.HasPrefix(r.stderr, tt.wantStderr) || (tt.wantStderr == "") != (r.stderr == "") {
				t.Errorf("exit %d stdout %q stderr %q; want %d, %q, %q", r.code, r.stdout, r.stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("usage errors reached the server: %q", srv.Requests())
	}
}

// TestRunReadsEnvironment checks the real entry point wires PT_API_URL and
// PT_TOKEN through.
func TestRunReadsEnvironment(t *testing.T) {
	srv := platinumtest.NewServer(t)
	id := created(t, srv, ptd(t, srv, "sandbox", "create", "-t", "busybox").stdout).ID
	t.Setenv("PT_API_URL", srv.URL)
	t.Setenv("PT_TOKEN", platinumtest.Token)
	var stdout, stderr strings.Builder
	if code := run(t.Context(), []string{"sandbox", "exec", id, "--", "echo", "hi"}, &stdout, &stderr); code != 0 || stdout.String() != "hi\n" {
		t.Errorf("exit %d stdout %q stderr %q", code, stdout.String(), stderr.String())
	}
}

// slowBuild is a fake template build of size bytes that reports each of
// lines as its progress, a second apart, so a progress line lasts long
// enough to be shown (ptd keeps one at most every 300ms).
func slowBuild(size int64, lines ...string) func(ctx context.Context, slug, versionID string, progress func(string)) (string, int64, error) {
	return func(ctx context.Context, slug, versionID string, progress func(string)) (string, int64, error) {
		for _, line := range lines {
			progress(line)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return "", 0, ctx.Err()
			}
		}
		return "/templates/" + versionID, size, nil
	}
}
