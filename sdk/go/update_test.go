package platinum_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

func TestUpdate(t *testing.T) {
	tests := []struct {
		name       string
		call       func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.Sandbox, error)
		wantName   string // on the server afterwards; "" means none
		wantResume bool
		wantCode   string
		wantField  string
	}{
		{name: "rename", call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.Sandbox, error) {
			return s.Rename(ctx, id, "ci-runner-2")
		}, wantName: "ci-runner-2", wantResume: true},
		{name: "clear the name", call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.Sandbox, error) {
			return s.ClearName(ctx, id)
		}, wantResume: true},
		{name: "rename to empty clears", call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.Sandbox, error) {
			return s.Rename(ctx, id, "")
		}, wantResume: true},
		{name: "auto-resume off keeps the name", call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.Sandbox, error) {
			return s.SetAutoResume(ctx, id, false)
		}, wantName: "web", wantResume: false},
		{name: "both at once", call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.Sandbox, error) {
			return s.Update(ctx, id, platinum.UpdateRequest{Name: new(""), AutoResume: new(false)})
		}, wantResume: false},
		{name: "empty update changes nothing", call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.Sandbox, error) {
			return s.Update(ctx, id, platinum.UpdateRequest{})
		}, wantName: "web", wantResume: true},
		{name: "name taken by a live sandbox", call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.Sandbox, error) {
			return s.Rename(ctx, id, "taken")
		}, wantName: "web", wantResume: true, wantCode: platinum.CodeConflict},
		{name: "bad name", call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.Sandbox, error) {
			return s.Rename(ctx, id, "-bad name")
		}, wantName: "web", wantResume: true, wantCode: platinum.CodeInvalidRequest, wantField: "name"},
		{name: "unknown sandbox", call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.Sandbox, error) {
			return s.Rename(ctx, "sbx_missing", "x")
		}, wantName: "web", wantResume: true, wantCode: platinum.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := newServer(t)
			id := running(t, c, platinum.CreateSandboxRequest{Name: "web"}).ID
			running(t, c, platinum.CreateSandboxRequest{Name: "taken"})
			sb, err := tt.call(t.Context(), c.Sandboxes, id)
			got, _ := srv.Sandbox(id)
			if got.Name != tt.wantName || !got.NoAutoResume != tt.wantResume {
				t.Errorf("server has name %q auto_resume %v, want %q %v", got.Name, !got.NoAutoResume, tt.wantName, tt.wantResume)
			}
			if tt.wantCode != "" {
				var ae *platinum.APIError
				if !errors.As(err, &ae) || ae.Code != tt.wantCode || ae.Field() != tt.wantField {
					t.Fatalf("err = %v, want APIError %s on field %q", err, tt.wantCode, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sb.ID != id || sb.Name != tt.wantName || sb.AutoResume != tt.wantResume {
				t.Errorf("answer = %+v, want name %q auto_resume %v", sb, tt.wantName, tt.wantResume)
			}
			if last := srv.Requests()[len(srv.Requests())-1]; last != "PATCH /v1/sandboxes/"+id {
				t.Errorf("request = %q", last)
			}
		})
	}
}

func TestRenameFreesTheOldName(t *testing.T) {
	_, c := newServer(t)
	a := running(t, c, platinum.CreateSandboxRequest{}).ID
	b := running(t, c, platinum.CreateSandboxRequest{}).ID
	ctx := t.Context()
	if _, err := c.Sandboxes.Rename(ctx, a, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes.Rename(ctx, a, "ci-2"); err != nil {
		t.Fatal(err)
	}
	if sb, err := c.Sandboxes.Rename(ctx, b, "ci"); err != nil || sb.Name != "ci" {
		t.Fatalf("Rename(b, ci) = %+v, %v; the name should be free", sb, err)
	}
	// A deleted sandbox's name is free too.
	if _, err := c.Sandboxes.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	if sb, err := c.Sandboxes.Rename(ctx, a, "ci"); err != nil || sb.Name != "ci" {
		t.Fatalf("Rename(a, ci) after deleting b = %+v, %v", sb, err)
	}
}

func TestSetEnv(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	tests := []struct {
		name      string
		state     string
		env       map[string]string // before
		call      func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.EnvResult, error)
		want      *platinum.EnvResult // ID and State filled in by the test
		wantEnv   map[string]string   // on the server afterwards
		wantCode  string
		wantLocal bool // fails before any request
	}{
		{name: "the guide's example", state: "running", env: map[string]string{"API_TOKEN": "old", "OLD_UNUSED": "1", "KEEP": "k"},
			call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.EnvResult, error) {
				return s.SetEnv(ctx, id, map[string]*string{"API_TOKEN": new("new-value"), "OLD_UNUSED": nil})
			},
			want:    &platinum.EnvResult{EnvKeys: []string{"API_TOKEN", "KEEP"}, Applies: platinum.AppliesNextExec},
			wantEnv: map[string]string{"API_TOKEN": "new-value", "KEEP": "k"}},
		{name: "stopped applies at next start", state: "stopped",
			call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.EnvResult, error) {
				return s.SetEnv(ctx, id, map[string]*string{"A": new("1")})
			},
			want:    &platinum.EnvResult{EnvKeys: []string{"A"}, Applies: platinum.AppliesNextStart},
			wantEnv: map[string]string{"A": "1"}},
		{name: "removing an absent key is fine", state: "running", env: map[string]string{"A": "1"},
			call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.EnvResult, error) {
				return s.SetEnv(ctx, id, map[string]*string{"NOPE": nil})
			},
			want:    &platinum.EnvResult{EnvKeys: []string{"A"}, Applies: platinum.AppliesNextExec},
			wantEnv: map[string]string{"A": "1"}},
		{name: "nil changes nothing", state: "running", env: map[string]string{"A": "1"},
			call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.EnvResult, error) {
				return s.SetEnv(ctx, id, nil)
			},
			want:    &platinum.EnvResult{EnvKeys: []string{"A"}, Applies: platinum.AppliesNextExec},
			wantEnv: map[string]string{"A": "1"}},
		{name: "UpdateEnv sets and unsets", state: "running", env: map[string]string{"A": "1", "B": "2"},
			call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.EnvResult, error) {
				return s.UpdateEnv(ctx, id, map[string]string{"C": "3", "A": "x"}, "B")
			},
			want:    &platinum.EnvResult{EnvKeys: []string{"A", "C"}, Applies: platinum.AppliesNextExec},
			wantEnv: map[string]string{"A": "x", "C": "3"}},
		{name: "UpdateEnv refuses a key both set and unset", state: "running", env: map[string]string{"A": "1"},
			call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.EnvResult, error) {
				return s.UpdateEnv(ctx, id, map[string]string{"A": "2"}, "A")
			},
			wantEnv: map[string]string{"A": "1"}, wantLocal: true},
		{name: "merged env over 256 KiB changes nothing", state: "running", env: map[string]string{"A": big, "B": big, "S": "s"},
			call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.EnvResult, error) {
				return s.SetEnv(ctx, id, map[string]*string{"C": &big, "S": nil})
			},
			wantEnv: map[string]string{"A": big, "B": big, "S": "s"}, wantCode: platinum.CodeEnvTooLarge},
		{name: "one variable over 128 KiB", state: "running",
			call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.EnvResult, error) {
				return s.SetEnv(ctx, id, map[string]*string{"BIG": new(strings.Repeat("x", 128<<10))})
			},
			wantCode: platinum.CodeEnvVarTooLarge},
		{name: "bad key", state: "running",
			call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.EnvResult, error) {
				return s.SetEnv(ctx, id, map[string]*string{"1X": new("v")})
			},
			wantCode: platinum.CodeInvalidRequest},
		{name: "unknown sandbox", state: "running",
			call: func(ctx context.Context, s *platinum.SandboxesService, id string) (*platinum.EnvResult, error) {
				return s.SetEnv(ctx, "sbx_missing", map[string]*string{"A": new("1")})
			},
			wantCode: platinum.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := newServer(t)
			id := inState(t, c, platinum.CreateSandboxRequest{Env: tt.env}, platinum.State(tt.state))
			n := len(srv.Requests())
			res, err := tt.call(t.Context(), c.Sandboxes, id)
			got, _ := srv.Sandbox(id)
			if !maps.Equal(got.Env, tt.wantEnv) {
				t.Errorf("server env = %.80v, want %.80v", got.Env, tt.wantEnv)
			}
			if sent := len(srv.Requests()) - n; sent != map[bool]int{true: 0, false: 1}[tt.wantLocal] {
				t.Errorf("sent %d requests", sent)
			}
			switch {
			case tt.wantLocal:
				if err == nil {
					t.Fatal("no error")
				}
				return
			case tt.wantCode != "":
				if !platinum.IsCode(err, tt.wantCode) {
					t.Fatalf("err = %v, want %s", err, tt.wantCode)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			want := *tt.want
			want.ID, want.State = id, platinum.State(tt.state)
			if !reflect.DeepEqual(res, &want) {
				t.Errorf("result = %+v, want %+v", res, want)
			}
		})
	}
}

func TestSetEnvNewCommandsSeeIt(t *testing.T) {
	_, c := newServer(t)
	id := running(t, c, platinum.CreateSandboxRequest{Env: map[string]string{"API_TOKEN": "old", "OLD_UNUSED": "1"}}).ID
	ctx := t.Context()
	if _, err := c.Sandboxes.SetEnv(ctx, id, map[string]*string{"API_TOKEN": new("new-value"), "OLD_UNUSED": nil}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Sandboxes.Exec(ctx, id, platinum.ExecRequest{Cmd: []string{"printenv", "API_TOKEN"}})
	if err != nil || res.Stdout != "new-value\n" {
		t.Errorf("printenv API_TOKEN = %+v, %v", res, err)
	}
	res, err = c.Sandboxes.Exec(ctx, id, platinum.ExecRequest{Cmd: []string{"printenv", "OLD_UNUSED"}})
	if err != nil || res.ExitCode != 1 {
		t.Errorf("printenv OLD_UNUSED = %+v, %v; want it unset", res, err)
	}
}

func TestSetEnvConcurrentPatchesAllSurvive(t *testing.T) {
	srv, c, id := withSandbox(t)
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := c.Sandboxes.SetEnv(t.Context(), id, map[string]*string{fmt.Sprintf("K%02d", i): new("v")})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	got, _ := srv.Sandbox(id)
	if len(got.Env) != n {
		t.Errorf("server env has %d keys, want %d: %v", len(got.Env), n, slices.Sorted(maps.Keys(got.Env)))
	}
}

func TestParentAndChildren(t *testing.T) {
	srv, c := newServer(t)
	ctx := t.Context()
	parent := running(t, c, platinum.CreateSandboxRequest{Metadata: map[string]string{"team": "a"}}).ID
	other := inState(t, c, platinum.CreateSandboxRequest{Metadata: map[string]string{"team": "b"}}, platinum.StateStopped)

	var kids []string
	for i := range 2 {
		sb, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", ParentID: parent,
			Metadata: map[string]string{"team": "a", "n": fmt.Sprint(i)}}, platinum.WaitForRunning(0))
		if err != nil {
			t.Fatal(err)
		}
		if sb.ParentID != parent || !sb.AutoResume {
			t.Errorf("child = %+v, want parent %s and auto_resume on", sb, parent)
		}
		kids = append([]string{sb.ID}, kids...) // newest first
	}

	got, err := c.Sandboxes.Children(ctx, parent)
	if err != nil || !slices.Equal(ids(got), kids) {
		t.Errorf("Children = %q, %v; want %q", ids(got), err, kids)
	}
	if got, err := c.Sandboxes.Children(ctx, kids[0]); err != nil || got == nil || len(got) != 0 {
		t.Errorf("Children of a leaf = %v, %v; want an empty list", got, err)
	}
	if _, err := c.Sandboxes.Children(ctx, "sbx_missing"); !platinum.IsNotFound(err) {
		t.Errorf("Children of an unknown sandbox: err = %v, want not_found", err)
	}

	listTests := []struct {
		name      string
		opts      platinum.ListOptions
		wantIDs   []string
		wantQuery string
	}{
		{"children", platinum.ListOptions{ParentID: parent}, kids, "paginated=true&parent_id=" + parent},
		{"roots", platinum.ListOptions{RootsOnly: true}, []string{other, parent}, "paginated=true&parent_id=none"},
		{"metadata", platinum.ListOptions{Metadata: map[string]string{"team": "a"}}, append(slices.Clone(kids), parent), "metadata%5Bteam%5D=a&paginated=true"},
		{"metadata pairs combine", platinum.ListOptions{Metadata: map[string]string{"team": "a", "n": "0"}}, kids[1:], "metadata%5Bn%5D=0&metadata%5Bteam%5D=a&paginated=true"},
		{"roots with metadata", platinum.ListOptions{RootsOnly: true, Metadata: map[string]string{"team": "a"}}, []string{parent}, "metadata%5Bteam%5D=a&paginated=true&parent_id=none"},
		{"children in a state", platinum.ListOptions{ParentID: parent, State: platinum.StateStopped}, nil, "paginated=true&parent_id=" + parent + "&state=stopped"},
		{"everything by default", platinum.ListOptions{}, append(slices.Clone(kids), other, parent), "paginated=true"},
	}
	for _, tt := range listTests {
		t.Run("list "+tt.name, func(t *testing.T) {
			l, err := c.Sandboxes.List(t.Context(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(l.Rows), tt.wantIDs) || l.Total != len(tt.wantIDs) {
				t.Errorf("List = %q total %d, want %q", ids(l.Rows), l.Total, tt.wantIDs)
			}
			if last := srv.Requests()[len(srv.Requests())-1]; last != "GET /v1/sandboxes?"+tt.wantQuery {
				t.Errorf("request = %q, want ?%s", last, tt.wantQuery)
			}
		})
	}
	t.Run("iterate keeps the filters on every page", func(t *testing.T) {
		before := len(srv.Requests())
		var got []string
		for sb, err := range c.Sandboxes.Iterate(t.Context(), platinum.ListOptions{ParentID: parent, Metadata: map[string]string{"team": "a"}, Limit: 1}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, sb.ID)
		}
		if !slices.Equal(got, kids) {
			t.Errorf("Iterate = %q, want %q", got, kids)
		}
		for _, r := range srv.Requests()[before:] {
			if !strings.Contains(r, "parent_id="+parent) || !strings.Contains(r, "metadata%5Bteam%5D=a") {
				t.Errorf("page request %q lacks the filters", r)
			}
		}
	})
	t.Run("parent and roots together", func(t *testing.T) {
		before := len(srv.Requests())
		if _, err := c.Sandboxes.List(t.Context(), platinum.ListOptions{ParentID: parent, RootsOnly: true}); err == nil {
			t.Error("no error")
		}
		if len(srv.Requests()) != before {
			t.Error("the bad options reached the server")
		}
	})

	t.Run("delete a parent with live children", func(t *testing.T) {
		_, err := c.Sandboxes.Delete(t.Context(), parent)
		var ae *platinum.APIError
		if !errors.As(err, &ae) || ae.Code != platinum.CodeConflict || ae.StatusCode != 409 {
			t.Fatalf("err = %v, want 409 conflict", err)
		}
		if want := slices.Sorted(slices.Values(kids)); !slices.Equal(ae.Children(), want) {
			t.Errorf("Children() = %q, want %q", ae.Children(), want)
		}
		if sb, _ := srv.Sandbox(parent); sb.State != "running" {
			t.Errorf("parent is %s after a refused delete", sb.State)
		}
		for _, k := range kids {
			if _, err := c.Sandboxes.Delete(t.Context(), k); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Sandboxes.Delete(t.Context(), parent); err != nil {
			t.Errorf("delete after the children: %v", err)
		}
	})
}

func TestCreateChildErrorsAndAutoResume(t *testing.T) {
	srv, c := newServer(t)
	stopped := inState(t, c, platinum.CreateSandboxRequest{}, platinum.StateStopped)
	tests := []struct {
		name      string
		req       platinum.CreateSandboxRequest
		wantCode  string
		wantField string
		wantState platinum.State
		wantAuto  bool
	}{
		{name: "missing parent", req: platinum.CreateSandboxRequest{Template: "busybox", ParentID: "sbx_missing"},
			wantCode: platinum.CodeNotFound, wantField: "parent_id"},
		{name: "parent not running", req: platinum.CreateSandboxRequest{Template: "busybox", ParentID: stopped},
			wantCode: platinum.CodeConflict, wantState: platinum.StateStopped},
		{name: "auto-resume off", req: platinum.CreateSandboxRequest{Template: "busybox", AutoResume: new(false)}},
		{name: "auto-resume on by default", req: platinum.CreateSandboxRequest{Template: "busybox"}, wantAuto: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creates := srv.Creates()
			sb, err := c.Sandboxes.Create(t.Context(), tt.req)
			if tt.wantCode != "" {
				var ae *platinum.APIError
				if !errors.As(err, &ae) || ae.Code != tt.wantCode || ae.Field() != tt.wantField || ae.State() != tt.wantState {
					t.Fatalf("err = %v, want %s field %q state %q", err, tt.wantCode, tt.wantField, tt.wantState)
				}
				if srv.Creates() != creates {
					t.Error("a sandbox was made")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := srv.Sandbox(sb.ID)
			if sb.AutoResume != tt.wantAuto || got.NoAutoResume == tt.wantAuto || sb.ParentID != "" || got.ParentID != "" {
				t.Errorf("client %+v, server auto_resume %v parent %q", sb, !got.NoAutoResume, got.ParentID)
			}
		})
	}
}

func ids(rows []platinum.Sandbox) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}
