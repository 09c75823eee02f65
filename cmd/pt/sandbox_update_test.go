package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	platinum "github.com/platinum-dev/platinum/sdk/go"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

// verbCase is one pt command line against a server seeded by setup. In args
// and the wants, $NAME stands for the ID setup returned under NAME.
type verbCase[S verbServer] struct {
	name  string
	setup func(S) map[string]string
	args  []string

	wantCode   int
	wantStdout string
	// stdoutHas, when set, replaces the exact wantStdout check.
	stdoutHas  []string
	wantStderr string // exact; for usage errors (exit 2) a prefix
	check      func(t *testing.T, srv S, ids map[string]string, r result)
}

// requestIDLine is the line pt adds after an API error.
var requestIDLine = regexp.MustCompile(`(?m)^request id: req_[0-9a-f]+ \(ptd's logs name it; quote it when reporting this\)\n`)

// verbServer is what the cases need of a server: the requests it got.
type verbServer interface{ Requests() []string }

// runVerbCases runs each case on a server of its own from start, running
// pt with run.
func runVerbCases[S verbServer](t *testing.T, start func(*testing.T) S, run func(*testing.T, S, ...string) result, tests []verbCase[S]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := start(t)
			ids := map[string]string{}
			if tt.setup != nil {
				ids = tt.setup(srv)
			}
			names := slices.SortedFunc(maps.Keys(ids), func(a, b string) int { return cmp.Compare(len(b), len(a)) })
			sub := func(s string) string {
				for _, k := range names {
					s = strings.ReplaceAll(s, "$"+k, ids[k])
				}
				return s
			}
			var args []string
			for _, a := range tt.args {
				args = append(args, sub(a))
			}
			n := len(srv.Requests())
			r := run(t, srv, args...)
			if r.code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, tt.wantCode, r.stderr)
			}
			if tt.stdoutHas != nil {
				for _, w := range tt.stdoutHas {
					if !strings.Contains(r.stdout, sub(w)) {
						t.Errorf("stdout lacks %q:\n%s", sub(w), r.stdout)
					}
				}
			} else if diff := gocmp.Diff(sub(tt.wantStdout), r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if tt.wantCode == 2 {
				if !strings.HasPrefix(r.stderr, sub(tt.wantStderr)) || len(srv.Requests()) != n {
					t.Errorf("stderr %q, want it to start with %q; requests %q", r.stderr, sub(tt.wantStderr), srv.Requests()[n:])
				}
				return
			}
			// ptd's errors end with their request id, which pt prints and
			// which varies.
			stderr := requestIDLine.ReplaceAllString(r.stderr, "")
			if diff := gocmp.Diff(sub(tt.wantStderr), stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if tt.check != nil {
				tt.check(t, srv, ids, r)
			}
		})
	}
}

// seed creates one sandbox through ptd's API as $ID, stopped when asked.
func seed(req platinum.CreateSandboxRequest, stopped bool) func(*platinumtest.Server) map[string]string {
	return func(s *platinumtest.Server) map[string]string {
		return map[string]string{"ID": seedIn(s, req, stopped)}
	}
}

// seedIn creates a sandbox (busybox unless req names a template) and
// waits until it runs, or stops it.
func seedIn(s *platinumtest.Server, req platinum.CreateSandboxRequest, stopped bool) string {
	ctx := context.Background()
	c := platinum.New(s.URL, platinumtest.Token, platinum.WithPollInterval(5*time.Millisecond))
	if req.Template == "" {
		req.Template = "busybox"
	}
	sb, err := c.Sandboxes.Create(ctx, req, platinum.WaitForRunning(30*time.Second))
	if err == nil && stopped {
		_, err = c.Sandboxes.Stop(ctx, sb.ID, platinum.WaitForStopped(30*time.Second))
	}
	if err != nil {
		panic("seed: " + err.Error())
	}
	return sb.ID
}

// startPtd is platinumtest.NewServer for runVerbCases.
func startPtd(t *testing.T) *platinumtest.Server { return platinumtest.NewServer(t) }

// lastRequest returns the server's last request.
func lastRequest(srv verbServer) string {
	reqs := srv.Requests()
	if len(reqs) == 0 {
		return ""
	}
	return reqs[len(reqs)-1]
}

func TestSandboxRename(t *testing.T) {
	t.Parallel()
	named := func(s *platinumtest.Server) map[string]string {
		seedIn(s, platinum.CreateSandboxRequest{Name: "taken"}, false)
		return map[string]string{"ID": seedIn(s, platinum.CreateSandboxRequest{Name: "web"}, false)}
	}
	hasName := func(want string) func(*testing.T, *platinumtest.Server, map[string]string, result) {
		return func(t *testing.T, srv *platinumtest.Server, ids map[string]string, _ result) {
			sb, _ := srv.Sandbox(ids["ID"])
			if got := sb.Name; got != want {
				t.Errorf("server has name %q, want %q", got, want)
			}
		}
	}
	runVerbCases(t, startPtd, ptd, []verbCase[*platinumtest.Server]{
		{name: "rename (the guide's example)", setup: named, args: []string{"sandbox", "rename", "$ID", "ci-runner-2"},
			wantStdout: "sandbox $ID: renamed to ci-runner-2\n", check: hasName("ci-runner-2")},
		{name: "clear the name", setup: named, args: []string{"sandbox", "rename", "$ID", "--clear"},
			wantStdout: "sandbox $ID: name cleared\n", check: hasName("")},
		{name: "json", setup: named, args: []string{"sandbox", "rename", "--json", "$ID", "ci"},
			stdoutHas: []string{`"id": "$ID"`, `"name": "ci"`}, check: hasName("ci")},
		{name: "name taken by a live sandbox", setup: named, args: []string{"sandbox", "rename", "$ID", "taken"}, wantCode: 1,
			wantStderr: "pt: name \"taken\" is taken by another live sandbox: conflict\n" +
				"hint: another live sandbox is named \"taken\": find it with `pt sandbox list`, rename it or delete it, or pick another name\n",
			check: hasName("web")},
		{name: "bad name", setup: named, args: []string{"sandbox", "rename", "$ID", "-x"}, wantCode: 2,
			wantStderr: "pt: flag provided but not defined: -x"},
		{name: "bad name after --", setup: named, args: []string{"sandbox", "rename", "$ID", "--", "no spaces"}, wantCode: 1,
			wantStderr: "pt: name: must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit\n", check: hasName("web")},
		{name: "unknown sandbox", args: []string{"sandbox", "rename", "sbx_missing", "x"}, wantCode: 1,
			wantStderr: "pt: sandbox \"sbx_missing\": not found\nhint: list your sandboxes with `pt sandbox list`\n"},
		{name: "no name", setup: named, args: []string{"sandbox", "rename", "$ID"}, wantCode: 2,
			wantStderr: "pt: want a NAME, or --clear to remove the name\n\nusage: pt sandbox rename ID NAME [--json]\n       pt sandbox rename ID --clear"},
		{name: "name and --clear", setup: named, args: []string{"sandbox", "rename", "$ID", "x", "--clear"}, wantCode: 2,
			wantStderr: "pt: give a NAME or --clear, not both\n"},
		{name: "nothing", args: []string{"sandbox", "rename"}, wantCode: 2, wantStderr: "pt: want a sandbox ID and a NAME (or --clear)\n"},
	})
}

func TestSandboxUpdateAutoResume(t *testing.T) {
	t.Parallel()
	autoResume := func(want bool) func(*testing.T, *platinumtest.Server, map[string]string, result) {
		return func(t *testing.T, srv *platinumtest.Server, ids map[string]string, _ result) {
			if sb, _ := srv.Sandbox(ids["ID"]); sb.NoAutoResume == want {
				t.Errorf("server has auto_resume %v, want %v", !sb.NoAutoResume, want)
			}
		}
	}
	runVerbCases(t, startPtd, ptd, []verbCase[*platinumtest.Server]{
		{name: "off", setup: seed(platinum.CreateSandboxRequest{}, true), args: []string{"sandbox", "update", "$ID", "--auto-resume", "off"},
			stdoutHas: []string{"Auto-resume:", "off (only `pt sandbox start` brings it back)\n"}, check: autoResume(false)},
		{name: "back on, as JSON", setup: seed(platinum.CreateSandboxRequest{AutoResume: new(false)}, false), args: []string{"sandbox", "update", "$ID", "--auto-resume=on", "--json"},
			stdoutHas: []string{`"auto_resume": true`}, check: autoResume(true)},
		{name: "rename too", setup: seed(platinum.CreateSandboxRequest{}, false), args: []string{"sandbox", "update", "$ID", "--name", "ci", "--auto-resume", "false"},
			stdoutHas: []string{"Name:", " ci\n", "Auto-resume:"}, check: autoResume(false)},
		{name: "nothing to change", setup: seed(platinum.CreateSandboxRequest{}, false), args: []string{"sandbox", "update", "$ID"}, wantCode: 2,
			wantStderr: "pt: nothing to change: give --auto-resume, --name or --clear-name\n"},
		{name: "not on or off", setup: seed(platinum.CreateSandboxRequest{}, false), args: []string{"sandbox", "update", "$ID", "--auto-resume", "maybe"}, wantCode: 2,
			wantStderr: "pt: invalid value \"maybe\" for flag -auto-resume: want on or off, got \"maybe\"\n"},
	})
}

func TestSandboxEnv(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 100<<10)
	const running = "new commands see the change now; processes already running and services started at boot keep the old values until the next cold boot\n"
	hasEnv := func(want map[string]string) func(*testing.T, *platinumtest.Server, map[string]string, result) {
		return func(t *testing.T, srv *platinumtest.Server, ids map[string]string, r result) {
			sb, _ := srv.Sandbox(ids["ID"])
			if !maps.Equal(sb.Env, want) && (len(sb.Env) != 0 || len(want) != 0) {
				t.Errorf("server env = %.60v, want %.60v", sb.Env, want)
			}
			if strings.Contains(r.stdout+r.stderr, "new-value") || strings.Contains(r.stdout+r.stderr, "xxxxxxxx") {
				t.Error("a value was printed")
			}
		}
	}
	seeded := seed(platinum.CreateSandboxRequest{Env: map[string]string{"API_TOKEN": "old", "OLD_UNUSED": "1", "KEEP": "k"}}, false)
	runVerbCases(t, startPtd, ptd, []verbCase[*platinumtest.Server]{
		{name: "rotate a credential (the guide's example)", setup: seeded,
			args:       []string{"sandbox", "env", "$ID", "API_TOKEN=new-value", "--unset", "OLD_UNUSED"},
			wantStdout: "env keys: API_TOKEN, KEEP\napplies: next_exec\n", wantStderr: running,
			check: hasEnv(map[string]string{"API_TOKEN": "new-value", "KEEP": "k"})},
		{name: "stopped applies at the next start", setup: seed(platinum.CreateSandboxRequest{}, true),
			args:       []string{"sandbox", "env", "$ID", "A=1", "B=x=y", "C="},
			wantStdout: "env keys: A, B, C\napplies: next_start\n", wantStderr: "the sandbox is stopped; it sees the change when it next starts\n",
			check: hasEnv(map[string]string{"A": "1", "B": "x=y", "C": ""})},
		{name: "unset only", setup: seeded, args: []string{"sandbox", "env", "$ID", "--unset", "KEEP", "--unset", "OLD_UNUSED"},
			wantStdout: "env keys: API_TOKEN\napplies: next_exec\n", wantStderr: running,
			check: hasEnv(map[string]string{"API_TOKEN": "old"})},
		{name: "json has keys, not values", setup: seeded, args: []string{"sandbox", "env", "$ID", "API_TOKEN=new-value", "--json"},
			wantStdout: "{\n  \"id\": \"$ID\",\n  \"state\": \"running\",\n  \"env_keys\": [\n    \"API_TOKEN\",\n    \"KEEP\",\n    \"OLD_UNUSED\"\n  ],\n  \"applies\": \"next_exec\"\n}\n",
			check:      hasEnv(map[string]string{"API_TOKEN": "new-value", "KEEP": "k", "OLD_UNUSED": "1"})},
		{name: "whole env over 256 KiB changes nothing", setup: seed(platinum.CreateSandboxRequest{Env: map[string]string{"A": big, "B": big}}, false),
			args: []string{"sandbox", "env", "$ID", "C=" + big}, wantCode: 1,
			wantStderr: fmt.Sprintf("pt: the merged environment would be %d bytes; the limit is 262144: env too large\n", 3*(len(big)+3)) +
				"hint: a sandbox's environment is limited to 256 KiB in all: remove variables with `pt sandbox env ID --unset KEY`, or put large values in a file (`pt sandbox cp`)\n",
			check: hasEnv(map[string]string{"A": big, "B": big})},
		{name: "one variable over 128 KiB", setup: seed(platinum.CreateSandboxRequest{}, false),
			args: []string{"sandbox", "env", "$ID", "BIG=" + strings.Repeat("x", 128<<10)}, wantCode: 1,
			wantStderr: "pt: BIG=… is 131077 bytes with its NUL; the limit per variable is 131072\n" +
				"hint: one KEY=VALUE is limited to 128 KiB: put large values in a file with `pt sandbox cp` instead\n",
			check: hasEnv(nil)},
		{name: "unknown sandbox", args: []string{"sandbox", "env", "sbx_missing", "A=1"}, wantCode: 1,
			wantStderr: "pt: sandbox \"sbx_missing\": not found\nhint: list your sandboxes with `pt sandbox list`\n"},
		{name: "a key without a value", setup: seeded, args: []string{"sandbox", "env", "$ID", "API_TOKEN"}, wantCode: 2,
			wantStderr: "pt: want KEY=VALUE, got \"API_TOKEN\"; remove a key with --unset KEY\n"},
		{name: "set and unset", setup: seeded, args: []string{"sandbox", "env", "$ID", "A=1", "--unset", "A"}, wantCode: 2,
			wantStderr: "pt: A is both set and unset\n"},
		{name: "nothing to change", setup: seeded, args: []string{"sandbox", "env", "$ID"}, wantCode: 2,
			wantStderr: "pt: nothing to change: give KEY=VALUE or --unset KEY\n"},
	})
}

// family seeds a running parent $P with children $K1 and $K2 (newer), a
// stopped top-level sandbox $S, and metadata to filter on.
func family(s *platinumtest.Server) map[string]string {
	p := seedIn(s, platinum.CreateSandboxRequest{Template: "pt-base", CPU: 1, RAMMB: 512, DiskGB: 2, Metadata: map[string]string{"team": "a"}}, false)
	k1 := seedIn(s, platinum.CreateSandboxRequest{CPU: 1, RAMMB: 512, DiskGB: 2, ParentID: p, Metadata: map[string]string{"team": "a", "n": "1"}}, false)
	k2 := seedIn(s, platinum.CreateSandboxRequest{CPU: 1, RAMMB: 512, DiskGB: 2, ParentID: p, Metadata: map[string]string{"team": "b"}}, false)
	st := seedIn(s, platinum.CreateSandboxRequest{CPU: 1, RAMMB: 512, DiskGB: 2}, true)
	created := func(id string) string {
		sb, _ := s.Sandbox(id)
		return sb.CreatedAt.UTC().Format(time.RFC3339)
	}
	return map[string]string{"P": p, "K1": k1, "K2": k2, "S": st, "CREATED_K1": created(k1), "CREATED_K2": created(k2)}
}

// listed checks which sandboxes a table shows, and the request made.
func listed(wantRequest string, want ...string) func(*testing.T, *platinumtest.Server, map[string]string, result) {
	return func(t *testing.T, srv *platinumtest.Server, ids map[string]string, r result) {
		var got []string
		for i, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if f := strings.Fields(line); i > 0 && len(f) > 0 {
				got = append(got, f[0])
			}
		}
		var wantIDs []string
		for _, w := range want {
			wantIDs = append(wantIDs, ids[w])
		}
		if !slices.Equal(got, wantIDs) {
			t.Errorf("listed %q, want %q (%q)", got, wantIDs, want)
		}
		for k, v := range ids {
			wantRequest = strings.ReplaceAll(wantRequest, "$"+k, v)
		}
		if got := lastRequest(srv); got != wantRequest {
			t.Errorf("request = %q, want %q", got, wantRequest)
		}
	}
}

func TestSandboxTree(t *testing.T) {
	t.Parallel()
	runVerbCases(t, startPtd, ptd, []verbCase[*platinumtest.Server]{
		{name: "children", setup: family, args: []string{"sandbox", "children", "$P"},
			wantStdout: "" +
				"ID                               NAME   STATE     TYPE         TEMPLATE   CPU   RAM     DISK   CREATED\n" +
				"$K2   -      running   persistent   busybox    1     512MB   2GB    $CREATED_K2\n" +
				"$K1   -      running   persistent   busybox    1     512MB   2GB    $CREATED_K1\n"},
		{name: "children as JSON", setup: family, args: []string{"sandbox", "children", "$P", "--json"},
			stdoutHas: []string{`"rows": [`, `"id": "$K2"`, `"parent_id": "$P"`}},
		{name: "no children", setup: family, args: []string{"sandbox", "children", "$K1"},
			wantStdout: "ID   NAME   STATE   TYPE   TEMPLATE   CPU   RAM   DISK   CREATED\n"},
		{name: "children of an unknown sandbox", args: []string{"sandbox", "children", "sbx_missing"}, wantCode: 1,
			wantStderr: "pt: sandbox \"sbx_missing\": not found\nhint: list your sandboxes with `pt sandbox list`\n"},
		{name: "list --parent (the guide's example)", setup: family, args: []string{"sandbox", "list", "--parent", "$P"},
			stdoutHas: []string{}, check: listed("GET /v1/sandboxes?paginated=true&parent_id=$P", "K2", "K1")},
		{name: "list --roots", setup: family, args: []string{"sandbox", "list", "--roots"},
			stdoutHas: []string{}, check: listed("GET /v1/sandboxes?paginated=true&parent_id=none", "S", "P")},
		{name: "list --metadata", setup: family, args: []string{"sandbox", "list", "--metadata", "team=a"},
			stdoutHas: []string{}, check: listed("GET /v1/sandboxes?metadata%5Bteam%5D=a&paginated=true", "K1", "P")},
		{name: "list with every filter", setup: family, args: []string{"sandbox", "list", "--parent", "$P", "--metadata", "team=a", "--metadata", "n=1", "--state", "running"},
			stdoutHas: []string{}, check: listed("GET /v1/sandboxes?metadata%5Bn%5D=1&metadata%5Bteam%5D=a&paginated=true&parent_id=$P&state=running", "K1")},
		{name: "list --parent and --roots", args: []string{"sandbox", "list", "--parent", "sbx_x", "--roots"}, wantCode: 2,
			wantStderr: "pt: give --parent or --roots, not both\n"},
		{name: "get shows the parent", setup: family, args: []string{"sandbox", "get", "$K1"},
			stdoutHas: []string{"\nParent:     $P\n"}},
		{name: "create a child (the guide's example)", setup: family, args: []string{"sandbox", "create", "-t", "pt-base", "--parent", "$P", "--no-auto-resume", "--json"},
			stdoutHas: []string{`"parent_id": "$P"`, `"auto_resume": false`},
			check: func(t *testing.T, srv *platinumtest.Server, ids map[string]string, r result) {
				var got struct{ ID string }
				if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
					t.Fatal(err)
				}
				if sb, _ := srv.Sandbox(got.ID); sb.ParentID != ids["P"] || !sb.NoAutoResume {
					t.Errorf("server has parent %q auto_resume %v", sb.ParentID, !sb.NoAutoResume)
				}
			}},
		{name: "create under a stopped parent", setup: family, args: []string{"sandbox", "create", "-t", "busybox", "--parent", "$S"}, wantCode: 1,
			wantStderr: "pt: sandbox is stopped; this needs it running to create children (the parent)\n" +
				"hint: the parent $S is stopped; start it with `pt sandbox start $S --wait`, then create the child\n"},
		{name: "create under a missing parent", args: []string{"sandbox", "create", "-t", "busybox", "--parent", "sbx_missing"}, wantCode: 1,
			wantStderr: "pt: parent \"sbx_missing\": not found\nhint: list your sandboxes with `pt sandbox list`\n"},
		{name: "create with a taken name", setup: func(s *platinumtest.Server) map[string]string {
			seedIn(s, platinum.CreateSandboxRequest{Name: "ci"}, false)
			return nil
		}, args: []string{"sandbox", "create", "-t", "busybox", "--name", "ci"}, wantCode: 1,
			wantStderr: "pt: name \"ci\" is taken by another live sandbox: conflict\n" +
				"hint: another live sandbox is named \"ci\": find it with `pt sandbox list`, rename it or delete it, or pick another name\n"},
		{name: "rm a parent with live children", setup: family, args: []string{"sandbox", "rm", "$P"}, wantCode: 1,
			wantStderr: "pt: sandbox has 2 live children; delete them first: [$K1 $K2]\n" +
				"hint: delete its children first (`pt sandbox rm $K1 $K2`), then this sandbox; deleting a sandbox never deletes its children\n",
			check: func(t *testing.T, srv *platinumtest.Server, ids map[string]string, _ result) {
				for _, k := range []string{"P", "K1", "K2"} {
					if sb, _ := srv.Sandbox(ids[k]); sb.State != "running" {
						t.Errorf("%s is %s", k, sb.State)
					}
				}
			}},
		{name: "rm a parent before its children", setup: family, args: []string{"sandbox", "rm", "$P", "$K1", "$K2"},
			wantStdout: "$K1\n$K2\n$P\n",
			check: func(t *testing.T, srv *platinumtest.Server, ids map[string]string, _ result) {
				for _, k := range []string{"P", "K1", "K2"} {
					// The deletes finish in the background.
					deadline := time.Now().Add(30 * time.Second)
					for sb, _ := srv.Sandbox(ids[k]); sb.State != "deleted"; sb, _ = srv.Sandbox(ids[k]) {
						if sb.State != "deleting" || time.Now().After(deadline) {
							t.Errorf("%s is %s", k, sb.State)
							break
						}
						time.Sleep(5 * time.Millisecond)
					}
				}
			}},
		{name: "rm a parent and only some children", setup: family, args: []string{"sandbox", "rm", "$P", "$K1"}, wantCode: 1,
			wantStdout: "$K1\n",
			wantStderr: "pt: $P: sandbox has 1 live children; delete them first: [$K2]\npt: could not delete $P\n" +
				"hint: delete its children first (`pt sandbox rm $K2`), then this sandbox; deleting a sandbox never deletes its children\n"},
	})
}
