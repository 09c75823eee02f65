package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Seed 004 (the main product document) example by example: every curl
// command runs verbatim through bash and the real curl, every pt command
// through bash and the real pt, against the test's ptd. Only what the
// seed itself marks as a placeholder is substituted: $PT_API_URL,
// $PT_TOKEN and $SBX come from the environment, and the elided ID
// "sbx_01K…" becomes a real sandbox ID.

// seedSh runs script with bash, with PT_API_URL/PT_TOKEN set to the test's
// ptd, vars as further environment variables, pt on PATH, and each
// placeholder of repl (old, new pairs) replaced. curl answers end with a
// "\n<status>" line (a shell function adds -w; the example's own text is
// unchanged).
func seedSh(t *testing.T, script string, vars map[string]string, repl ...string) (stdout, stderr string, code int) {
	t.Helper()
	script = strings.NewReplacer(repl...).Replace(script)
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

// seedCurl runs one curl example and returns its HTTP status and body.
func seedCurl(t *testing.T, script string, vars map[string]string, repl ...string) (int, []byte) {
	t.Helper()
	out, stderr, code := seedSh(t, script, vars, repl...)
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

// seedWaitState polls a sandbox until it reaches state.
func seedWaitState(t *testing.T, c *client, id, state string) map[string]any {
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

// seedStep is one curl example of seed 004 and what the seed says it
// answers.
type seedStep struct {
	name  string
	curl  string
	want  int
	check func(t *testing.T, m map[string]any, body []byte)
	// child: the example's sbx_01K… is the child sandbox, not $SBX.
	child bool
}

func TestSeed004CurlExamples(t *testing.T) {
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
	steps := []seedStep{
		{"create", `curl -sS -X POST "$PT_API_URL/v1/sandboxes?wait_for_state=running" \
  -H "Authorization: Bearer $PT_TOKEN" -H "Content-Type: application/json" \
  -d '{"template":"pt-base","cpu":2,"ram_mb":1024}'`, 201, func(t *testing.T, m map[string]any, _ []byte) {
			if m["state"] != "running" || m["template"] != "pt-base" || m["cpu"] != 2.0 || m["ram_mb"] != 1024.0 {
				t.Fatalf("create: %v", m)
			}
			vars["SBX"] = m["id"].(string)
		}, false},
		{"list running", `curl "$PT_API_URL/v1/sandboxes?state=running&limit=100" -H "Authorization: Bearer $PT_TOKEN"`, 200,
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
		{"list paginated", `curl "$PT_API_URL/v1/sandboxes?state=running&limit=100&paginated=true" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if total, ok := m["total"].(float64); !ok || int(total) < len(rowIDs(m)) {
					t.Errorf("paginated=true: total %v for %d rows", m["total"], len(rowIDs(m)))
				}
			}, false},
		{"limit over 200", `curl "$PT_API_URL/v1/sandboxes?limit=201" -H "Authorization: Bearer $PT_TOKEN"`, 400, nil, false},
		{"create child", `curl -X POST "$PT_API_URL/v1/sandboxes" -H "Authorization: Bearer $PT_TOKEN" \
  -H 'Content-Type: application/json' -d '{"template":"pt-base","parent_id":"sbx_01K…"}'`, 201, func(t *testing.T, m map[string]any, _ []byte) {
			if m["parent_id"] != vars["SBX"] {
				t.Fatalf("child parent_id %v, want %s", m["parent_id"], vars["SBX"])
			}
			child = m["id"].(string)
		}, false},
		{"children", `curl "$PT_API_URL/v1/sandboxes/$SBX/children" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if ids := rowIDs(m); !slices.Equal(ids, []string{child}) {
					t.Errorf("children %v, want [%s]", ids, child)
				}
				row := m["rows"].([]any)[0].(map[string]any)
				if ca, _ := row["createdAt"].(string); !sixDigitUTC.MatchString(ca) {
					t.Errorf("child-list createdAt %q", ca)
				}
			}, false},
		{"list by parent", `curl "$PT_API_URL/v1/sandboxes?parent_id=$SBX" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if ids := rowIDs(m); !slices.Equal(ids, []string{child}) {
					t.Errorf("parent_id=$SBX: %v, want [%s]", ids, child)
				}
			}, false},
		{"list roots", `curl "$PT_API_URL/v1/sandboxes?parent_id=none" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if ids := rowIDs(m); !slices.Contains(ids, vars["SBX"]) || slices.Contains(ids, child) {
					t.Errorf("parent_id=none: %v", ids)
				}
			}, false},
		// The SDK's rootsOnly (TS) / roots_only (Python) as query params.
		{"list rootsOnly", `curl "$PT_API_URL/v1/sandboxes?rootsOnly=true" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if ids := rowIDs(m); !slices.Contains(ids, vars["SBX"]) || slices.Contains(ids, child) {
					t.Errorf("rootsOnly=true: %v", ids)
				}
			}, false},
		{"default list has both", `curl "$PT_API_URL/v1/sandboxes?limit=200" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if ids := rowIDs(m); !slices.Contains(ids, vars["SBX"]) || !slices.Contains(ids, child) {
					t.Errorf("default list: %v", ids)
				}
			}, false},
		{"get", `curl "$PT_API_URL/v1/sandboxes/$SBX" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if m["id"] != vars["SBX"] {
					t.Errorf("get: %v", m)
				}
			}, false},
		{"metrics", `curl "$PT_API_URL/v1/sandboxes/$SBX/metrics" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if _, ok := m["memory_used_bytes"]; !ok {
					t.Errorf("metrics: %v", m)
				}
			}, false},
		{"usage", `curl "$PT_API_URL/v1/sandboxes/$SBX/usage" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if _, ok := m["cpu_seconds"]; !ok {
					t.Errorf("usage: %v", m)
				}
			}, false},
		{"rename", `curl -X PATCH "$PT_API_URL/v1/sandboxes/$SBX" -H "Authorization: Bearer $PT_TOKEN" \
  -H "Content-Type: application/json" -d '{"name":"ci-runner-2"}'`, 200, func(t *testing.T, m map[string]any, _ []byte) {
			if m["name"] != "ci-runner-2" {
				t.Errorf("rename: %v", m["name"])
			}
		}, false},
		{"clear name (null)", `curl -X PATCH "$PT_API_URL/v1/sandboxes/$SBX" -H "Authorization: Bearer $PT_TOKEN" \
  -H "Content-Type: application/json" -d '{"name":null}'`, 200, func(t *testing.T, m map[string]any, _ []byte) {
			if v, ok := m["name"]; !ok || v != nil {
				t.Errorf("cleared name: %v", m["name"])
			}
		}, false},
		{"seed an env var to remove", `curl -X PATCH "$PT_API_URL/v1/sandboxes/$SBX/env" -H "Authorization: Bearer $PT_TOKEN" \
  -H "Content-Type: application/json" -d '{"env":{"OLD_UNUSED":"old"}}'`, 200, nil, false},
		{"env patch", `curl -X PATCH "$PT_API_URL/v1/sandboxes/$SBX/env" -H "Authorization: Bearer $PT_TOKEN" \
  -H "Content-Type: application/json" -d '{"env":{"API_TOKEN":"new-value","OLD_UNUSED":null}}'`, 200,
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
		{"auto_resume off", `curl -X PATCH "$PT_API_URL/v1/sandboxes/$SBX" -H "Authorization: Bearer $PT_TOKEN" \
  -H "Content-Type: application/json" -d '{"auto_resume": false}'`, 200, func(t *testing.T, m map[string]any, _ []byte) {
			if m["auto_resume"] != false {
				t.Errorf("auto_resume %v", m["auto_resume"])
			}
		}, false},
		{"live resize", `curl -sS -X POST "$PT_API_URL/v1/sandboxes/$SBX/resize" -H "Authorization: Bearer $PT_TOKEN" \
  -H "Content-Type: application/json" -d '{"cpu":4,"ram_mb":8192}'`, 200, func(t *testing.T, m map[string]any, _ []byte) {
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
		{"not resizable live", `curl -sS -X POST "$PT_API_URL/v1/sandboxes/$SBX/resize" -H "Authorization: Bearer $PT_TOKEN" \
  -H "Content-Type: application/json" -d '{"cpu":32}'`, 409, func(t *testing.T, m map[string]any, _ []byte) {
			lr, _ := m["live_resize"].(map[string]any)
			hint, _ := m["hint"].(map[string]any)
			steps, _ := hint["steps"].([]any)
			want := []any{"POST /v1/sandboxes/" + vars["SBX"] + "/stop", "POST /v1/sandboxes/" + vars["SBX"] + "/resize"}
			if m["code"] != "sandbox_not_resizable" || lr["supported"] != false || !strings.Contains(lr["reason"].(string), "cpu 32 is above") ||
				hint["action"] != "stop_then_resize" || hint["applies_at"] != "restart" || !slices.Equal(steps, want) {
				t.Errorf("not resizable: %v", m)
			}
		}, false},
		{"delete parent with live child", `curl -X DELETE "$PT_API_URL/v1/sandboxes/$SBX" -H "Authorization: Bearer $PT_TOKEN"`, 409,
			func(t *testing.T, m map[string]any, _ []byte) {
				if kids, _ := m["children"].([]any); !slices.Equal(kids, []any{child}) {
					t.Errorf("409 names %v, want [%s]", m["children"], child)
				}
			}, false},
		{"stop", `curl -X POST "$PT_API_URL/v1/sandboxes/$SBX/stop?wait_for_state=stopped" -H "Authorization: Bearer $PT_TOKEN"`, 200,
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
		{"stopped resize", `curl -X POST "$PT_API_URL/v1/sandboxes/$SBX/resize" -H "Authorization: Bearer $PT_TOKEN" \
  -H "Content-Type: application/json" -d '{"cpu":4,"ram_mb":8192,"disk_gb":8}'`, 200, func(t *testing.T, m map[string]any, _ []byte) {
			if m["cpu"] != 4.0 || m["ram_mb"] != 8192.0 || m["disk_gb"] != 8.0 || m["applies_at"] != "next_start" {
				t.Errorf("stopped resize: %v", m)
			}
		}, false},
		{"start", `curl -X POST "$PT_API_URL/v1/sandboxes/$SBX/start?wait_for_state=running" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if m["state"] != "running" || m["disk_gb"] != 8.0 || m["cpu"] != 4.0 {
					t.Errorf("start: %v", m)
				}
			}, false},
		// "What a start restored": a cold boot after the resize.
		{"start again (idempotent), restore shown", `curl -sS -X POST "$PT_API_URL/v1/sandboxes/$SBX/start?wait_for_state=running" -H "Authorization: Bearer $PT_TOKEN"`, 200,
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
		{"stop child", `curl -X POST "$PT_API_URL/v1/sandboxes/sbx_01K…/stop?wait_for_state=stopped" -H "Authorization: Bearer $PT_TOKEN"`, 200, nil, true},
		{"archive", `curl -X POST "$PT_API_URL/v1/sandboxes/sbx_01K…/archive" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if st := seedWaitState(t, c, child, "archived"); st["status"] != "idle" {
					t.Errorf("archived status %v", st["status"])
				}
			}, true},
		{"start unarchives", `curl -X POST "$PT_API_URL/v1/sandboxes/sbx_01K…/start?wait_for_state=running" -H "Authorization: Bearer $PT_TOKEN"`, 200,
			func(t *testing.T, m map[string]any, _ []byte) {
				if m["state"] != "running" {
					t.Errorf("start of archived: %v", m["state"])
				}
			}, true},
		{"delete child", `curl -X DELETE "$PT_API_URL/v1/sandboxes/sbx_01K…" -H "Authorization: Bearer $PT_TOKEN"`, 202, nil, true},
		{"delete", `curl -X DELETE "$PT_API_URL/v1/sandboxes/$SBX" -H "Authorization: Bearer $PT_TOKEN"`, 202,
			func(t *testing.T, m map[string]any, _ []byte) {
				if m["state"] != "deleting" && m["state"] != "deleted" {
					t.Errorf("delete: %v", m["state"])
				}
			}, false},
	}
	for _, s := range steps {
		// Steps build on each other: the first failure stops the run.
		ok := t.Run(s.name, func(t *testing.T) {
			placeholder := vars["SBX"]
			if s.child {
				placeholder = child
			}
			status, body := seedCurl(t, s.curl, vars, "sbx_01K…", placeholder)
			if status != s.want {
				t.Fatalf("%s: %d, want %d: %s", s.curl, status, s.want, body)
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

// TestSeed004MissingParent: "A missing parent returns 404."
func TestSeed004MissingParent(t *testing.T) {
	newClient(t)
	status, body := seedCurl(t, `curl -X POST "$PT_API_URL/v1/sandboxes" -H "Authorization: Bearer $PT_TOKEN" \
  -H 'Content-Type: application/json' -d '{"template":"pt-base","parent_id":"sbx_01K…"}'`, nil, "sbx_01K…", "sbx_01K0000000000000000000000")
	if m := jsonMap(body); status != 404 || m["code"] != "not_found" || m["field"] != "parent_id" {
		t.Fatalf("missing parent: %d %s", status, body)
	}
}

// TestSeed004CLIExamples runs the seed's pt commands verbatim.
func TestSeed004CLIExamples(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "pt-base")
	vars := map[string]string{}
	idRe := regexp.MustCompile(`(?m)^ID:\s+(sbx_\w+)`)
	run := func(t *testing.T, cmd, id string) string {
		t.Helper()
		out, stderr, code := seedSh(t, cmd, vars, "sbx_01K…", id)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", cmd, code, out, stderr)
		}
		return out
	}
	out := run(t, "pt sandbox create -t pt-base --cpu 2 --ram 1024", "")
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
	if out := run(t, "pt sandbox list --state running --limit 100", ""); !strings.Contains(out, parent) {
		t.Errorf("list --state running: %s", out)
	}
	out = run(t, "pt sandbox create -t pt-base --parent sbx_01K…", parent)
	if mm = idRe.FindStringSubmatch(out); mm == nil {
		t.Fatalf("child create printed no ID: %s", out)
	}
	child = mm[1]
	if out := run(t, "pt sandbox children sbx_01K…", parent); !strings.Contains(out, child) {
		t.Errorf("children: %s", out)
	}
	if out := run(t, "pt sandbox list --parent sbx_01K…", parent); !strings.Contains(out, child) || strings.Contains(out, parent) {
		t.Errorf("list --parent: %s", out)
	}
	if out := run(t, "pt sandbox list --roots", ""); !strings.Contains(out, parent) || strings.Contains(out, child) {
		t.Errorf("list --roots: %s", out)
	}
	if out := run(t, "pt sandbox get sbx_01K…", parent); !strings.Contains(out, parent) {
		t.Errorf("get: %s", out)
	}
	run(t, "pt sandbox rename $SBX ci-runner-2", "")
	if m := c.do("GET", "/v1/sandboxes/"+parent, nil).JSON(); m["name"] != "ci-runner-2" {
		t.Errorf("rename: name %v", m["name"])
	}
	run(t, "# clear the name:\npt sandbox rename $SBX --clear", "")
	if m := c.do("GET", "/v1/sandboxes/"+parent, nil).JSON(); m["name"] != nil {
		t.Errorf("rename --clear: name %v", m["name"])
	}
	// The resize example on a running sandbox: cpu and memory live, the
	// disk grown online.
	run(t, "pt sandbox resize sbx_01K… --cpu 4 --ram 8192 --disk 8", parent)
	if m := c.do("GET", "/v1/sandboxes/"+parent, nil).JSON(); m["cpu"] != 4.0 || m["ram_mb"] != 8192.0 || m["disk_gb"] != 8.0 || m["state"] != "running" {
		t.Errorf("resize: %v", m)
	}
	run(t, "pt sandbox stop sbx_01K…", parent)
	seedWaitState(t, c, parent, "stopped")
	run(t, "pt sandbox start sbx_01K…", parent)
	seedWaitState(t, c, parent, "running")
	run(t, "pt sandbox stop sbx_01K…", child)
	seedWaitState(t, c, child, "stopped")
	vars["SBX"] = child
	run(t, "pt sandbox archive $SBX", "")
	seedWaitState(t, c, child, "archived")
	run(t, "pt sandbox rm sbx_01K…", child)
	run(t, "pt sandbox rm sbx_01K…", parent)
	for _, id := range []string{child, parent} {
		if st := c.do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil).JSON()["state"]; st != "deleting" && st != "deleted" {
			t.Errorf("rm %s: state %v", id, st)
		}
	}
}

// TestSeed004Sentences checks seed 004's normative sentences that have no
// example of their own.
func TestSeed004Sentences(t *testing.T) {
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
		// "Each KEY=VALUE string including its terminating NUL must also
		// fit Linux's 128 KiB per-string limit": 400 env_var_too_large.
		{"patch: one var over 128 KiB", "PATCH", "/v1/sandboxes/" + id + "/env", map[string]any{"env": map[string]any{"BIG": big(128 * 1024)}}, 400, "env_var_too_large", "env"},
		{"create: one var over 128 KiB", "POST", "/v1/sandboxes", map[string]any{"template": "pt-base", "env": map[string]any{"BIG": big(128 * 1024)}}, 400, "env_var_too_large", "env"},
		// "… can return 413 env_too_large when their combined values would
		// exceed 256 KiB."
		{"patch: total over 256 KiB", "PATCH", "/v1/sandboxes/" + id + "/env", map[string]any{"env": map[string]any{"A": big(100 << 10), "B": big(100 << 10), "C": big(100 << 10)}}, 413, "env_too_large", ""},
		// "parent_id is set once at create."
		{"parent_id cannot change", "PATCH", "/v1/sandboxes/" + id, map[string]any{"parent_id": "sbx_01K0000000000000000000000"}, 400, "invalid_request", "parent_id"},
		// "The create body also accepts … gpus" (no host has GPUs).
		{"gpus over what hosts have", "POST", "/v1/sandboxes", map[string]any{"template": "pt-base", "gpus": 1}, 400, "invalid_request", "gpus"},
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
	// "The parent must be running": a stopped parent is 409.
	if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.Status != 200 {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "pt-base", "parent_id": id}); r.Status != 409 {
		t.Errorf("child of a stopped parent: %d %s", r.Status, r.Body)
	}
	// "Pass auto_stop_minutes … at create to override one. 0 disables that timer."
	r = c.do("POST", "/v1/sandboxes", map[string]any{"template": "pt-base", "auto_stop_minutes": 0})
	if m := r.JSON(); r.Status != 201 || m["auto_stop_minutes"] != 0.0 || m["auto_archive_days"] != 7.0 || m["type"] != "persistent" {
		t.Errorf("auto_stop_minutes 0: %d %s", r.Status, r.Body)
	}
	if id, ok := r.JSON()["id"].(string); ok {
		c.do("DELETE", "/v1/sandboxes/"+id, nil)
	}
	// A create whose wait runs out answers 202 with wait_timed_out and
	// Retry-After: 5, naming the sandbox (poll it; do not create again).
	r = c.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=1", map[string]any{"template": "pt-base"})
	if m := r.JSON(); r.Status != 202 || m["wait_timed_out"] != true || r.Header.Get("Retry-After") != "5" || m["id"] == nil {
		t.Errorf("create with a wait that runs out: %d %v %s", r.Status, r.Header, r.Body)
	}
	if tid, ok := r.JSON()["id"].(string); ok {
		seedWaitState(t, c, tid, "running")
		c.do("DELETE", "/v1/sandboxes/"+tid, nil)
	}
	// "applies is … next_start for a stopped one."
	if r := c.do("PATCH", "/v1/sandboxes/"+id+"/env", map[string]any{"env": map[string]any{"K": "v"}}); r.Status != 200 || r.JSON()["applies"] != "next_start" {
		t.Errorf("env patch of a stopped sandbox: %d %s", r.Status, r.Body)
	}
}
