package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/guide"
)

// The user guide (docs/*.md) example by example: every example marked
// "sh tested:NAME" runs verbatim through bash and the real curl or pt,
// against the test's ptd. The guide's variables come from the
// environment: PT_API_URL and PT_TOKEN are the test's ptd, $SBX (and the
// other IDs a page names) are the sandboxes the test made.

var guideExamples struct {
	once sync.Once
	ex   map[string]string
	err  error
}

// guideExample returns the guide's example ref ("sandboxes.md#create").
func guideExample(t *testing.T, ref string) string {
	t.Helper()
	guideExamples.once.Do(func() {
		guideExamples.ex, guideExamples.err = guide.Examples(filepath.Join("..", "..", "docs"))
	})
	if guideExamples.err != nil {
		t.Fatal(guideExamples.err)
	}
	ex, ok := guideExamples.ex[ref]
	if !ok {
		t.Fatalf("the guide has no example %s", ref)
	}
	return ex
}

// guideCommand returns the i-th command of the guide's example ref.
func guideCommand(t *testing.T, ref string, i int) string {
	t.Helper()
	cmds := guide.Commands(guideExample(t, ref))
	if i >= len(cmds) {
		t.Fatalf("%s has %d commands, not %d", ref, len(cmds), i+1)
	}
	return cmds[i]
}

// guideSh runs script with bash, with PT_API_URL/PT_TOKEN set to the
// test's ptd, vars as further environment variables and pt on PATH. curl
// answers end with a "\n<status>" line (a shell function adds -w; the
// example's own text is unchanged).
func guideSh(t *testing.T, script string, vars map[string]string) (stdout, stderr string, code int) {
	t.Helper()
	full := "curl() { command curl -s -w '\\n%{http_code}' \"$@\"; }\n" + script
	cmd := exec.Command("bash", "-c", full)
	cmd.Env = append(os.Environ(), "PT_API_URL="+env.url, "PT_TOKEN="+env.token, "PATH="+env.binDir+":"+os.Getenv("PATH"))
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// guideCurl runs one curl example and returns its HTTP status and body.
func guideCurl(t *testing.T, script string, vars map[string]string) (int, []byte) {
	t.Helper()
	out, stderr, code := guideSh(t, script, vars)
	if code != 0 {
		t.Fatalf("%s: exit %d: %s", script, code, stderr)
	}
	i := strings.LastIndex(out, "\n")
	status, err := strconv.Atoi(out[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("%s: no status line in %q", script, out)
	}
	return status, []byte(out[:i])
}

// guideRun runs one pt (or other shell) example command and returns its
// output, failing the test when it exits non-zero.
func guideRun(t *testing.T, script string, vars map[string]string) string {
	t.Helper()
	out, stderr, code := guideSh(t, script, vars)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", script, code, out, stderr)
	}
	return out
}

// jsonMap decodes an object body (nil when it is not one).
func jsonMap(b []byte) map[string]any {
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

// rowIDs lists the IDs of a {"rows": [...]} body.
func rowIDs(m map[string]any) []string {
	var ids []string
	rows, _ := m["rows"].([]any)
	for _, r := range rows {
		ids = append(ids, r.(map[string]any)["id"].(string))
	}
	return ids
}

// waitForState polls a sandbox until it reaches state.
func waitForState(t *testing.T, c *client, id, state string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	var m map[string]any
	for time.Now().Before(deadline) {
		m = c.do("GET", "/v1/sandboxes/"+id, nil).JSON()
		if m["state"] == state {
			return m
		}
		sleep(100)
	}
	t.Fatalf("sandbox %s never reached %s: %v", id, state, m)
	return nil
}

var sixDigitUTC = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// guideStep is one curl example of the guide (ex, or curl when the step
// is the test's own) and what the guide says it answers.
type guideStep struct {
	name  string
	ex    string // the guide's example, e.g. "sandboxes.md#create"
	curl  string // or a request of the test's own
	want  int
	check func(t *testing.T, m map[string]any, body []byte)
	// child: the example's $SBX is the child sandbox.
	child bool
}

// TestGuideCurlExamples walks one sandbox and its child through the
// guide's curl examples, from create to delete.
func TestGuideCurlExamples(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "pt-base")
	vars := map[string]string{}
	var child string
	// Children go before their parent (a parent with live children is 409).
	t.Cleanup(func() {
		if child != "" {
			c.do("DELETE", "/v1/sandboxes/"+child, nil)
		}
		if vars["SBX"] != "" {
			c.do("DELETE", "/v1/sandboxes/"+vars["SBX"], nil)
		}
	})
	steps := []guideStep{
		{"create", "sandboxes.md#create", "", 201, func(t *testing.T, m map[string]any, _ []byte) {
			if m["state"] != "running" || m["template"] != "pt-base" || m["cpu"] != 2.0 || m["ram_mb"] != 1024.0 {
				t.Fatalf("create: %v", m)
			}
			vars["SBX"] = m["id"].(string)
		}, false},
		{"list running", "sandboxes.md#list-running", "", 200,
			func(t *testing.T, m map[string]any, body []byte) {
				if !slices.Contains(rowIDs(m), vars["SBX"]) {
					t.Errorf("running list lacks %s", vars["SBX"])
				}
				for _, r := range m["rows"].([]any) {
					row := r.(map[string]any)
					ca, _ := row["createdAt"].(string)
					if row["state"] != "running" || !sixDigitUTC.MatchString(ca) || ca != row["created_at"] {
						t.Errorf("row %v: state %v createdAt %q", row["id"], row["state"], ca)
					}
					if _, ok := row["env"]; ok {
						t.Errorf("list row carries env values: %v", row)
					}
				}
			}, false},
		{"list paginated", "sandboxes.md#list-paginated", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if total, ok := m["total"].(float64); !ok || int(total) < len(rowIDs(m)) {
					t.Errorf("paginated=true: total %v for %d rows", m["total"], len(rowIDs(m)))
				}
			}, false},
		{"limit over 200", "", `curl "$PT_API_URL/v1/sandboxes?limit=201" -H "Authorization: Bearer $PT_TOKEN"`, 400, nil, false},
		{"create child", "sandboxes.md#create-child", "", 201, func(t *testing.T, m map[string]any, _ []byte) {
			if m["parent_id"] != vars["SBX"] {
				t.Fatalf("child parent_id %v, want %s", m["parent_id"], vars["SBX"])
			}
			child = m["id"].(string)
		}, false},
		{"children", "sandboxes.md#children", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if ids := rowIDs(m); !slices.Equal(ids, []string{child}) {
					t.Errorf("children %v, want [%s]", ids, child)
				}
				row := m["rows"].([]any)[0].(map[string]any)
				if ca, _ := row["createdAt"].(string); !sixDigitUTC.MatchString(ca) {
					t.Errorf("child-list createdAt %q", ca)
				}
			}, false},
		{"list by parent", "sandboxes.md#list-by-parent", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if ids := rowIDs(m); !slices.Equal(ids, []string{child}) {
					t.Errorf("parent_id=$SBX: %v, want [%s]", ids, child)
				}
			}, false},
		{"list roots", "sandboxes.md#list-roots", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if ids := rowIDs(m); !slices.Contains(ids, vars["SBX"]) || slices.Contains(ids, child) {
					t.Errorf("parent_id=none: %v", ids)
				}
			}, false},
		// The SDK's rootsOnly (TS) / roots_only (Python) as query params.
		{"list rootsOnly", "", `curl "$PT_API_URL/v1/sandboxes?rootsOnly=true" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if ids := rowIDs(m); !slices.Contains(ids, vars["SBX"]) || slices.Contains(ids, child) {
					t.Errorf("rootsOnly=true: %v", ids)
				}
			}, false},
		{"default list has both", "", `curl "$PT_API_URL/v1/sandboxes?limit=200" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if ids := rowIDs(m); !slices.Contains(ids, vars["SBX"]) || !slices.Contains(ids, child) {
					t.Errorf("default list: %v", ids)
				}
			}, false},
		{"get", "sandboxes.md#get", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if m["id"] != vars["SBX"] {
					t.Errorf("get: %v", m)
				}
			}, false},
		{"metrics", "sandboxes.md#metrics", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if _, ok := m["memory_used_bytes"]; !ok {
					t.Errorf("metrics: %v", m)
				}
			}, false},
		{"usage", "sandboxes.md#usage", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if _, ok := m["cpu_seconds"]; !ok {
					t.Errorf("usage: %v", m)
				}
			}, false},
		{"rename", "sandboxes.md#rename", "", 200, func(t *testing.T, m map[string]any, _ []byte) {
			if m["name"] != "ci-runner-2" {
				t.Errorf("rename: %v", m["name"])
			}
		}, false},
		{"clear name (null)", "sandboxes.md#clear-name", "", 200, func(t *testing.T, m map[string]any, _ []byte) {
			if v, ok := m["name"]; !ok || v != nil {
				t.Errorf("cleared name: %v", m["name"])
			}
		}, false},
		{"an env var to remove", "", `curl -X PATCH "$PT_API_URL/v1/sandboxes/$SBX/env" -H "Authorization: Bearer $PT_TOKEN" \
  -H "Content-Type: application/json" -d '{"env":{"OLD_UNUSED":"old"}}'`, 200, nil, false},
		{"env patch", "env-and-secrets.md#patch-env", "", 200,
			func(t *testing.T, m map[string]any, body []byte) {
				if m["applies"] != "next_exec" || bytes.Contains(body, []byte("new-value")) {
					t.Errorf("env patch: %s", body)
				}
				if keys, _ := m["env_keys"].([]any); len(keys) != 1 || keys[0] != "API_TOKEN" {
					t.Errorf("env_keys %v, want [API_TOKEN]", m["env_keys"])
				}
				if got := c.mustSh(vars["SBX"], "printenv API_TOKEN"); got != "new-value\n" {
					t.Errorf("printenv API_TOKEN = %q", got)
				}
				if res := c.sh(vars["SBX"], "printenv OLD_UNUSED"); res.ExitCode == 0 {
					t.Errorf("OLD_UNUSED still set: %q", res.Stdout)
				}
			}, false},
		{"auto_resume off", "lifecycle.md#auto-resume-off", "", 200, func(t *testing.T, m map[string]any, _ []byte) {
			if m["auto_resume"] != false {
				t.Errorf("auto_resume %v", m["auto_resume"])
			}
		}, false},
		{"live resize", "resize.md#live", "", 200, func(t *testing.T, m map[string]any, _ []byte) {
			req, _ := m["requested"].(map[string]any)
			live, _ := m["live"].(map[string]any)
			if m["state"] != "running" || m["cpu"] != 4.0 || m["ram_mb"] != 8192.0 || m["applies_at"] != "now" || m["partial"] != false ||
				req["cpu"] != 4.0 || req["ram_mb"] != 8192.0 {
				t.Errorf("live resize: %v", m)
			}
			// guest_cpus_online is what the guest sees: 4, or every core of
			// a smaller host (nproc inside says the same).
			nproc := strings.TrimSpace(c.mustSh(vars["SBX"], "nproc"))
			if want := float64(min(4, runtime.NumCPU())); live["guest_cpus_online"] != want || nproc != strconv.Itoa(int(want)) {
				t.Errorf("guest_cpus_online %v, nproc %s, want %v", live["guest_cpus_online"], nproc, want)
			}
			for _, k := range []string{"max_cpu", "max_ram_mb", "guest_mem_total_mb"} {
				if _, ok := live[k].(float64); !ok {
					t.Errorf("live.%s missing: %v", k, live)
				}
			}
		}, false},
		{"not resizable live", "resize.md#not-resizable", "", 409, func(t *testing.T, m map[string]any, _ []byte) {
			lr, _ := m["live_resize"].(map[string]any)
			hint, _ := m["hint"].(map[string]any)
			steps, _ := hint["steps"].([]any)
			want := []any{"POST /v1/sandboxes/" + vars["SBX"] + "/stop", "POST /v1/sandboxes/" + vars["SBX"] + "/resize"}
			if m["code"] != "sandbox_not_resizable" || lr["supported"] != false || !strings.Contains(lr["reason"].(string), "cpu 32 is above") ||
				hint["action"] != "stop_then_resize" || hint["applies_at"] != "restart" || !slices.Equal(steps, want) {
				t.Errorf("not resizable: %v", m)
			}
		}, false},
		{"delete parent with live child", "sandboxes.md#delete", "", 409,
			func(t *testing.T, m map[string]any, _ []byte) {
				if kids, _ := m["children"].([]any); !slices.Equal(kids, []any{child}) {
					t.Errorf("409 names %v, want [%s]", m["children"], child)
				}
			}, false},
		{"stop", "stop-start.md#stop", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if m["state"] != "stopped" {
					t.Errorf("stop: %v", m["state"])
				}
				// auto_resume is off: a preview request that passes the
				// token check gets 404 auto-resume-disabled and starts nothing.
				u := getPreview(t, c, vars["SBX"], 8080, "")
				r := pdo(t, previewClient(false), "GET", u.URL, nil, map[string]string{"X-Pt-Preview-Token": u.Token})
				if r.status != 404 || !strings.Contains(r.body, "auto-resume-disabled") {
					t.Errorf("preview of a stopped auto_resume=false sandbox: %d %s", r.status, r.body)
				}
				if st := c.do("GET", "/v1/sandboxes/"+vars["SBX"], nil).JSON()["state"]; st != "stopped" {
					t.Errorf("after the preview request: state %v", st)
				}
			}, false},
		// A stopped sandbox takes all three sizes at once and boots at them.
		{"stopped resize", "resize.md#stopped", "", 200, func(t *testing.T, m map[string]any, _ []byte) {
			if m["cpu"] != 4.0 || m["ram_mb"] != 8192.0 || m["disk_gb"] != 8.0 || m["applies_at"] != "next_start" {
				t.Errorf("stopped resize: %v", m)
			}
		}, false},
		{"start", "stop-start.md#start", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if m["state"] != "running" || m["disk_gb"] != 8.0 || m["cpu"] != 4.0 {
					t.Errorf("start: %v", m)
				}
			}, false},
		// "What a start restored": a cold boot after the resize.
		{"start again (idempotent), restore shown", "stop-start.md#start-restore", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if m["id"] != vars["SBX"] || m["state"] != "running" || !strings.HasPrefix(m["host_id"].(string), "host_") ||
					m["restore"] != "disk_only" || m["ram_restored"] != false {
					t.Errorf("start answer: %v", m)
				}
				md, _ := m["metadata"].(map[string]any)
				if ls, _ := md["last_start"].(string); !strings.Contains(ls, "disk_only") {
					t.Errorf("metadata.last_start %q", ls)
				}
				// "A disk_only start is recorded as a start_ram_not_restored host event."
				if rows := rowsOf(t, c, "/v1/events?format=json&type=start_ram_not_restored&sandbox_id="+vars["SBX"]); len(rows) == 0 {
					t.Error("no start_ram_not_restored event for the disk-only start")
				}
				if got := strings.TrimSpace(c.mustSh(vars["SBX"], "df -k / | awk 'NR==2{print $2}'")); got == "" {
					t.Error("df printed nothing")
				} else if kb, _ := strconv.Atoi(got); kb < 7*1024*1024 {
					t.Errorf("root filesystem %d KB after growing disk_gb to 8", kb)
				}
			}, false},
		{"stop child", "stop-start.md#stop", "", 200, nil, true},
		{"archive", "archive.md#archive", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if st := waitForState(t, c, child, "archived"); st["status"] != "idle" {
					t.Errorf("archived status %v", st["status"])
				}
			}, true},
		{"start unarchives", "archive.md#start-archived", "", 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if m["state"] != "running" {
					t.Errorf("start of archived: %v", m["state"])
				}
			}, true},
		{"delete child", "sandboxes.md#delete", "", 202, nil, true},
		{"delete", "sandboxes.md#delete", "", 202,
			func(t *testing.T, m map[string]any, _ []byte) {
				if m["state"] != "deleting" && m["state"] != "deleted" {
					t.Errorf("delete: %v", m["state"])
				}
			}, false},
	}
	for _, s := range steps {
		// Steps build on each other: the first failure stops the run.
		ok := t.Run(s.name, func(t *testing.T) {
			script, sv := s.curl, vars
			if s.ex != "" {
				script = guideExample(t, s.ex)
			}
			if s.child {
				sv = map[string]string{"SBX": child}
			}
			status, body := guideCurl(t, script, sv)
			if status != s.want {
				t.Fatalf("%s: %d, want %d: %s", script, status, s.want, body)
			}
			if s.check != nil {
				s.check(t, jsonMap(body), body)
			}
		})
		if !ok {
			return
		}
	}
}

// TestGuideMissingParent: the child example with a parent that does not
// exist is 404.
func TestGuideMissingParent(t *testing.T) {
	newClient(t)
	status, body := guideCurl(t, guideExample(t, "sandboxes.md#create-child"), map[string]string{"SBX": "sbx_01K0000000000000000000000"})
	if m := jsonMap(body); status != 404 || m["code"] != "not_found" || m["field"] != "parent_id" {
		t.Fatalf("missing parent: %d %s", status, body)
	}
}

// TestGuideCLIExamples walks one sandbox and its child through the
// guide's pt examples, from create to rm.
func TestGuideCLIExamples(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "pt-base")
	vars := map[string]string{}
	idRe := regexp.MustCompile(`(?m)^ID:\s+(sbx_\w+)`)
	// run runs command i of the guide's example ref with $SBX = sbx.
	run := func(t *testing.T, ref string, i int, sbx string) string {
		t.Helper()
		return guideRun(t, guideCommand(t, ref, i), map[string]string{"SBX": sbx})
	}
	out := run(t, "sandboxes.md#create-cli", 0, "")
	mm := idRe.FindStringSubmatch(out)
	if mm == nil {
		t.Fatalf("create printed no ID: %s", out)
	}
	parent := mm[1]
	vars["SBX"] = parent
	var child string
	t.Cleanup(func() {
		if child != "" {
			c.do("DELETE", "/v1/sandboxes/"+child, nil)
		}
		c.do("DELETE", "/v1/sandboxes/"+parent, nil)
	})
	if m := c.do("GET", "/v1/sandboxes/"+parent, nil).JSON(); m["state"] != "running" || m["cpu"] != 2.0 || m["ram_mb"] != 1024.0 || m["template"] != "pt-base" {
		t.Fatalf("pt sandbox create: %v", m)
	}
	if out := run(t, "sandboxes.md#list-cli", 0, ""); !strings.Contains(out, parent) {
		t.Errorf("list --state running: %s", out)
	}
	out = run(t, "sandboxes.md#children-cli", 0, parent)
	if mm = idRe.FindStringSubmatch(out); mm == nil {
		t.Fatalf("child create printed no ID: %s", out)
	}
	child = mm[1]
	if out := run(t, "sandboxes.md#children-cli", 1, parent); !strings.Contains(out, child) {
		t.Errorf("children: %s", out)
	}
	if out := run(t, "sandboxes.md#children-cli", 2, parent); !strings.Contains(out, child) || strings.Contains(out, parent) {
		t.Errorf("list --parent: %s", out)
	}
	if out := run(t, "sandboxes.md#children-cli", 3, parent); !strings.Contains(out, parent) || strings.Contains(out, child) {
		t.Errorf("list --roots: %s", out)
	}
	if out := run(t, "sandboxes.md#get-cli", 0, parent); !strings.Contains(out, parent) {
		t.Errorf("get: %s", out)
	}
	run(t, "sandboxes.md#rename-cli", 0, parent)
	if m := c.do("GET", "/v1/sandboxes/"+parent, nil).JSON(); m["name"] != "ci-runner-2" {
		t.Errorf("rename: name %v", m["name"])
	}
	run(t, "sandboxes.md#rename-cli", 1, parent)
	if m := c.do("GET", "/v1/sandboxes/"+parent, nil).JSON(); m["name"] != nil {
		t.Errorf("rename --clear: name %v", m["name"])
	}
	// The resize example on a running sandbox: cpu and memory live, the
	// disk grown online.
	run(t, "resize.md#cli", 0, parent)
	if m := c.do("GET", "/v1/sandboxes/"+parent, nil).JSON(); m["cpu"] != 4.0 || m["ram_mb"] != 8192.0 || m["disk_gb"] != 8.0 || m["state"] != "running" {
		t.Errorf("resize: %v", m)
	}
	run(t, "stop-start.md#stop-start-cli", 0, parent)
	waitForState(t, c, parent, "stopped")
	run(t, "stop-start.md#stop-start-cli", 1, parent)
	waitForState(t, c, parent, "running")
	run(t, "stop-start.md#stop-start-cli", 0, child)
	waitForState(t, c, child, "stopped")
	run(t, "archive.md#archive-cli", 0, child)
	waitForState(t, c, child, "archived")
	run(t, "sandboxes.md#delete-cli", 0, child)
	run(t, "sandboxes.md#delete-cli", 0, parent)
	for _, id := range []string{child, parent} {
		if st := c.do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil).JSON()["state"]; st != "deleting" && st != "deleted" {
			t.Errorf("rm %s: state %v", id, st)
		}
	}
}

// TestGuideStatements checks the guide's rules that have no example of
// their own (the quoted sentences say the rule).
func TestGuideStatements(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "pt-base")
	id := c.create(map[string]any{"template": "pt-base"})
	big := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code, field        string
	}{
		// env-and-secrets.md: each KEY=VALUE string with its NUL must fit
		// Linux's 128 KiB per-string limit: 400 env_var_too_large.
		{"patch: one var over 128 KiB", "PATCH", "/v1/sandboxes/" + id + "/env", map[string]any{"env": map[string]any{"BIG": big(128 * 1024)}}, 400, "env_var_too_large", "env"},
		{"create: one var over 128 KiB", "POST", "/v1/sandboxes", map[string]any{"template": "pt-base", "env": map[string]any{"BIG": big(128 * 1024)}}, 400, "env_var_too_large", "env"},
		// env-and-secrets.md: the whole environment fits in 256 KiB, else
		// 413 env_too_large.
		{"patch: total over 256 KiB", "PATCH", "/v1/sandboxes/" + id + "/env", map[string]any{"env": map[string]any{"A": big(100 << 10), "B": big(100 << 10), "C": big(100 << 10)}}, 413, "env_too_large", ""},
		// sandboxes.md: parent_id is set once, at create.
		{"parent_id cannot change", "PATCH", "/v1/sandboxes/" + id, map[string]any{"parent_id": "sbx_01K0000000000000000000000"}, 400, "invalid_request", "parent_id"},
		// sandboxes.md, gpus.md: more GPUs than any host has is 409
		// gpus_unavailable (TestGPUsAtCreate says more).
		{"gpus over what hosts have", "POST", "/v1/sandboxes", map[string]any{"template": "pt-base", "gpus": 16}, 409, "gpus_unavailable", "gpus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do(tc.method, tc.path, tc.body)
			m := r.JSON()
			if r.Status != tc.status || m["code"] != tc.code || (tc.field != "" && m["field"] != tc.field) {
				t.Errorf("%d %s, want %d %s (field %q)", r.Status, r.Body, tc.status, tc.code, tc.field)
			}
		})
	}
	// A rejected patch changes nothing.
	if m := c.do("GET", "/v1/sandboxes/"+id, nil).JSON(); len(m["env_keys"].([]any)) != 0 {
		t.Errorf("rejected env patches left keys: %v", m["env_keys"])
	}
	// gpus: 0 is accepted.
	r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "pt-base", "gpus": 0, "ttl_ms": 60000})
	if r.Status != 201 {
		t.Errorf("gpus 0: %d %s", r.Status, r.Body)
	} else {
		c.do("DELETE", "/v1/sandboxes/"+r.JSON()["id"].(string), nil)
	}
	// sandboxes.md: a parent that is not running is 409.
	if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.Status != 200 {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "pt-base", "parent_id": id}); r.Status != 409 {
		t.Errorf("child of a stopped parent: %d %s", r.Status, r.Body)
	}
	// lifecycle.md: each timer can be set at create; 0 turns it off.
	status, body := guideCurl(t, guideExample(t, "lifecycle.md#auto-stop-off"), nil)
	if m := jsonMap(body); status != 201 || m["auto_stop_minutes"] != 0.0 || m["auto_archive_days"] != 7.0 || m["type"] != "persistent" {
		t.Errorf("auto_stop_minutes 0: %d %s", status, body)
	}
	if id, ok := jsonMap(body)["id"].(string); ok {
		c.do("DELETE", "/v1/sandboxes/"+id, nil)
	}
	// A create whose wait runs out answers 202 with wait_timed_out and
	// Retry-After: 5, naming the sandbox (poll it; do not create again).
	r = c.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=1", map[string]any{"template": "pt-base"})
	if m := r.JSON(); r.Status != 202 || m["wait_timed_out"] != true || r.Header.Get("Retry-After") != "5" || m["id"] == nil {
		t.Errorf("create with a wait that runs out: %d %v %s", r.Status, r.Header, r.Body)
	}
	if tid, ok := r.JSON()["id"].(string); ok {
		waitForState(t, c, tid, "running")
		c.do("DELETE", "/v1/sandboxes/"+tid, nil)
	}
	// env-and-secrets.md: applies is next_start for a stopped sandbox.
	if r := c.do("PATCH", "/v1/sandboxes/"+id+"/env", map[string]any{"env": map[string]any{"K": "v"}}); r.Status != 200 || r.JSON()["applies"] != "next_start" {
		t.Errorf("env patch of a stopped sandbox: %d %s", r.Status, r.Body)
	}
}
