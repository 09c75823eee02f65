package platinum_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	platinum "github.com/platinum-dev/platinum/sdk/go"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

// slowStart is a host start that takes d, then fails with err when it is
// not nil.
func slowStart(d time.Duration, err error) func(context.Context, hostapi.StartSpec) (hostapi.Instance, error) {
	return func(ctx context.Context, _ hostapi.StartSpec) (hostapi.Instance, error) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return hostapi.Instance{}, ctx.Err()
		}
		return hostapi.Instance{Address: "127.0.0.1"}, err
	}
}

// newServer starts ptd in-process (platinumtest) and a client for it that
// polls every few milliseconds. Each non-nil setup then adjusts the server
// (e.g. a table case's fake host behaviour) before the test uses it.
func newServer(t *testing.T, setups ...func(*platinumtest.Server)) (*platinumtest.Server, *platinum.Client) {
	t.Helper()
	srv := platinumtest.NewServer(t)
	for _, setup := range setups {
		if setup != nil {
			setup(srv)
		}
	}
	return srv, platinum.New(srv.URL, platinumtest.Token, platinum.WithPollInterval(5*time.Millisecond))
}

// withSandbox is newServer plus one running busybox sandbox, returned by
// ID: the starting point of most tests of calls on a sandbox.
func withSandbox(t *testing.T) (*platinumtest.Server, *platinum.Client, string) {
	t.Helper()
	srv, c := newServer(t)
	return srv, c, running(t, c, platinum.CreateSandboxRequest{}).ID
}

// running creates a busybox sandbox and waits until it runs.
func running(t *testing.T, c *platinum.Client, req platinum.CreateSandboxRequest) *platinum.Sandbox {
	t.Helper()
	if req.Template == "" {
		req.Template = "busybox"
	}
	sb, err := c.Sandboxes.Create(t.Context(), req, platinum.WaitForRunning(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// inState creates a busybox sandbox and brings it to state: running,
// stopped or archived.
func inState(t *testing.T, c *platinum.Client, req platinum.CreateSandboxRequest, state platinum.State) string {
	t.Helper()
	id := running(t, c, req).ID
	var err error
	switch state {
	case platinum.StateRunning:
	case platinum.StateStopped:
		_, err = c.Sandboxes.Stop(t.Context(), id, platinum.WaitForStopped(30*time.Second))
	case platinum.StateArchived:
		if _, err = c.Sandboxes.Stop(t.Context(), id, platinum.WaitForStopped(30*time.Second)); err == nil {
			_, err = c.Sandboxes.Archive(t.Context(), id, platinum.WaitForArchived(30*time.Second))
		}
	default:
		t.Fatalf("inState: cannot make a %s sandbox", state)
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// posts returns the requests that created sandboxes.
func posts(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if strings.HasPrefix(r, "POST /v1/sandboxes") && !strings.Contains(r, "/exec") {
			out = append(out, r)
		}
	}
	return out
}

func TestCreate(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(*platinumtest.Server)
		req         platinum.CreateSandboxRequest
		opts        []platinum.CreateOption
		wantPost    string
		wantState   platinum.State
		wantGets    bool // the client had to poll
		wantErrCode string
		wantField   string
		wantStateEr bool
	}{
		{
			name:      "no wait answers creating",
			req:       platinum.CreateSandboxRequest{Template: "pt-base", CPU: 2, RAMMB: 1024},
			wantPost:  "POST /v1/sandboxes",
			wantState: platinum.StateCreating,
		},
		{
			name:      "wait 201 running",
			req:       platinum.CreateSandboxRequest{Template: "pt-base"},
			opts:      []platinum.CreateOption{platinum.WaitForRunning(30 * time.Second)},
			wantPost:  "POST /v1/sandboxes?wait_for_state=running&wait_timeout_ms=30000",
			wantState: platinum.StateRunning,
		},
		{
			name:      "wait without timeout uses the server default",
			req:       platinum.CreateSandboxRequest{Template: "busybox"},
			opts:      []platinum.CreateOption{platinum.WaitForRunning(0)},
			wantPost:  "POST /v1/sandboxes?wait_for_state=running",
			wantState: platinum.StateRunning,
		},
		{
			name:      "wait longer than the server allows is capped",
			req:       platinum.CreateSandboxRequest{Template: "busybox"},
			opts:      []platinum.CreateOption{platinum.WaitForRunning(20 * time.Minute)},
			wantPost:  "POST /v1/sandboxes?wait_for_state=running&wait_timeout_ms=600000",
			wantState: platinum.StateRunning,
		},
		{
			name:      "202 wait_timed_out then polls to running",
			setup:     func(s *platinumtest.Server) { s.Host.StartFunc = slowStart(1500*time.Millisecond, nil) },
			req:       platinum.CreateSandboxRequest{Template: "busybox"},
			opts:      []platinum.CreateOption{platinum.WaitForRunning(time.Second)},
			wantPost:  "POST /v1/sandboxes?wait_for_state=running&wait_timeout_ms=1000",
			wantState: platinum.StateRunning,
			wantGets:  true,
		},
		{
			name: "failed sandbox is a StateError",
			setup: func(s *platinumtest.Server) {
				s.Host.StartFunc = slowStart(1500*time.Millisecond, errors.New("disk pool full"))
			},
			req:         platinum.CreateSandboxRequest{Template: "busybox"},
			opts:        []platinum.CreateOption{platinum.WaitForRunning(time.Second)},
			wantPost:    "POST /v1/sandboxes?wait_for_state=running&wait_timeout_ms=1000",
			wantState:   platinum.StateFailed,
			wantGets:    true,
			wantStateEr: true,
		},
		{
			name:        "unknown template",
			req:         platinum.CreateSandboxRequest{Template: "nope"},
			wantPost:    "POST /v1/sandboxes",
			wantErrCode: platinum.CodeNotFound,
			wantField:   "template",
		},
		{
			name:        "bad cpu",
			req:         platinum.CreateSandboxRequest{Template: "busybox", CPU: 99},
			wantPost:    "POST /v1/sandboxes",
			wantErrCode: platinum.CodeInvalidRequest,
			wantField:   "cpu",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := newServer(t, tt.setup)
			sb, err := c.Sandboxes.Create(t.Context(), tt.req, tt.opts...)
			if got := posts(srv.Requests()); !slices.Equal(got, []string{tt.wantPost}) {
				t.Errorf("create requests = %q, want [%q]", got, tt.wantPost)
			}
			if tt.wantErrCode != "" {
				var ae *platinum.APIError
				if !errors.As(err, &ae) || ae.Code != tt.wantErrCode || ae.Field() != tt.wantField {
					t.Fatalf("err = %v, want APIError %s on field %q", err, tt.wantErrCode, tt.wantField)
				}
				return
			}
			var se *platinum.StateError
			if tt.wantStateEr != errors.As(err, &se) || (!tt.wantStateEr && err != nil) {
				t.Fatalf("err = %v, want StateError: %v", err, tt.wantStateEr)
			}
			if sb == nil || sb.State != tt.wantState {
				t.Fatalf("sandbox = %+v, want state %s", sb, tt.wantState)
			}
			if srv.Creates() != 1 {
				t.Errorf("server made %d sandboxes, want 1", srv.Creates())
			}
			gets := slices.ContainsFunc(srv.Requests(), func(r string) bool { return strings.HasPrefix(r, "GET /v1/sandboxes/"+sb.ID) })
			if gets != tt.wantGets {
				t.Errorf("polled = %v, want %v (requests %q)", gets, tt.wantGets, srv.Requests())
			}
			if tt.req.CPU != 0 && sb.CPU != tt.req.CPU || tt.req.RAMMB != 0 && sb.RAMMB != tt.req.RAMMB {
				t.Errorf("sandbox size = %v CPU %d MB, want %v / %d", sb.CPU, sb.RAMMB, tt.req.CPU, tt.req.RAMMB)
			}
		})
	}
}

func TestCreateWaitEndsWithContext(t *testing.T) {
	srv, c := newServer(t)
	srv.Host.StartFunc = func(ctx context.Context, _ hostapi.StartSpec) (hostapi.Instance, error) {
		<-ctx.Done() // starts until the server closes
		return hostapi.Instance{}, ctx.Err()
	}
	ctx, cancel := context.WithCancel(t.Context())
	// Cancel once the client has polled a few times.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(srv.Requests()) < 4 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	defer func() { cancel(); <-done }()
	sb, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForRunning(time.Second))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if sb == nil || sb.ID == "" || sb.State != platinum.StateCreating {
		t.Fatalf("sandbox = %+v, want the creating sandbox as last seen", sb)
	}
	if srv.Creates() != 1 {
		t.Errorf("server made %d sandboxes, want 1", srv.Creates())
	}
}

func TestCreateSendsFields(t *testing.T) {
	_, c := newServer(t)
	sb, err := c.Sandboxes.Create(t.Context(), platinum.CreateSandboxRequest{
		Template: "busybox", CPU: 0.5, RAMMB: 256, DiskGB: 3, Name: "ci", Runtime: "gvisor",
		Env: map[string]string{"B": "2", "A": "1"}, Metadata: map[string]string{"team": "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sb.EnvKeys, []string{"A", "B"}) || sb.Name != "ci" || sb.CreatedAt.IsZero() {
		t.Errorf("client got %+v", sb)
	}
	got, err := c.Sandboxes.WaitForState(t.Context(), sb.ID, platinum.StateRunning)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"busybox", 0.5, 256, 3, "ci", "gvisor", map[string]string{"team": "x"}}
	have := []any{got.Template, got.CPU, got.RAMMB, got.DiskGB, got.Name, got.Runtime, got.Metadata}
	if !reflect.DeepEqual(have, want) {
		t.Errorf("server stored %v, want %v", have, want)
	}
	res, err := c.Sandboxes.Exec(t.Context(), sb.ID, platinum.ExecRequest{Shell: `echo "$A$B"`})
	if err != nil || res.Stdout != "12\n" {
		t.Errorf("the sandbox's env: %+v, %v", res, err)
	}
}

func TestGetDeleteWait(t *testing.T) {
	_, c := newServer(t)
	ctx := t.Context()
	id := running(t, c, platinum.CreateSandboxRequest{}).ID
	sb, err := c.Sandboxes.Get(ctx, id)
	if err != nil || sb.ID != id || sb.State != platinum.StateRunning {
		t.Fatalf("Get = %+v, %v", sb, err)
	}
	del, err := c.Sandboxes.Delete(ctx, id)
	if err != nil || del.State != platinum.StateDeleting {
		t.Fatalf("Delete = %+v, %v", del, err)
	}
	gone, err := c.Sandboxes.WaitForState(ctx, id, platinum.StateDeleted)
	if err != nil || gone.State != platinum.StateDeleted || gone.DeletedAt == nil {
		t.Errorf("WaitForState(deleted) = %+v, %v", gone, err)
	}
	if _, err := c.Sandboxes.Get(ctx, id); !platinum.IsNotFound(err) {
		t.Errorf("Get after delete: err = %v, want not_found", err)
	}
	if _, err := c.Sandboxes.WaitForState(ctx, id, platinum.StateRunning); !platinum.IsNotFound(err) {
		t.Errorf("WaitForState(running) of a deleted sandbox: err = %v, want not_found", err)
	}
	if _, err := c.Sandboxes.Delete(ctx, id); !platinum.IsNotFound(err) {
		t.Errorf("second Delete: err = %v, want not_found", err)
	}
}

func TestListAndIterate(t *testing.T) {
	srv, c := newServer(t)
	var ids []string // newest first once reversed
	for i := range 7 {
		id := running(t, c, platinum.CreateSandboxRequest{}).ID
		if i%3 == 0 {
			if _, err := c.Sandboxes.Stop(t.Context(), id, platinum.WaitForStopped(30*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, id)
	}
	slices.Reverse(ids)
	idsOf := func(rows []platinum.Sandbox) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	tests := []struct {
		name      string
		opts      platinum.ListOptions
		wantIDs   []string
		wantTotal int
	}{
		{"all", platinum.ListOptions{}, ids, 7},
		{"page", platinum.ListOptions{Limit: 2, Offset: 1}, ids[1:3], 7},
		{"past the end", platinum.ListOptions{Offset: 10}, nil, 7},
		{"state filter", platinum.ListOptions{State: platinum.StateStopped}, []string{ids[0], ids[3], ids[6]}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := c.Sandboxes.List(t.Context(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := idsOf(l.Rows); !slices.Equal(got, tt.wantIDs) || l.Total != tt.wantTotal {
				t.Errorf("List = %q total %d, want %q total %d", got, l.Total, tt.wantIDs, tt.wantTotal)
			}
		})
	}

	t.Run("limit too large", func(t *testing.T) {
		_, err := c.Sandboxes.List(t.Context(), platinum.ListOptions{Limit: 500})
		if !platinum.IsCode(err, platinum.CodeInvalidRequest) {
			t.Errorf("err = %v, want invalid_request", err)
		}
	})

	iterTests := []struct {
		name      string
		opts      platinum.ListOptions
		stopAfter int
		wantIDs   []string
		wantPages []string
	}{
		{"pages of 3", platinum.ListOptions{Limit: 3}, 0, ids, []string{"limit=3", "limit=3&offset=3", "limit=3&offset=6"}},
		{"exact multiple asks once more", platinum.ListOptions{Limit: 7}, 0, ids, []string{"limit=7", "limit=7&offset=7"}},
		{"default page", platinum.ListOptions{}, 0, ids, []string{"limit=100"}},
		{"from an offset with a filter", platinum.ListOptions{State: "running", Offset: 1, Limit: 2}, 0, []string{ids[2], ids[4], ids[5]},
			[]string{"limit=2&offset=1&state=running", "limit=2&offset=3&state=running"}},
		{"early break fetches no more", platinum.ListOptions{Limit: 2}, 1, ids[:1], []string{"limit=2"}},
	}
	for _, tt := range iterTests {
		t.Run("iterate "+tt.name, func(t *testing.T) {
			before := len(srv.Requests())
			var got []string
			for sb, err := range c.Sandboxes.Iterate(t.Context(), tt.opts) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, sb.ID)
				if len(got) == tt.stopAfter {
					break
				}
			}
			if !slices.Equal(got, tt.wantIDs) {
				t.Errorf("Iterate = %q, want %q", got, tt.wantIDs)
			}
			var pages []string
			for _, r := range srv.Requests()[before:] {
				pages = append(pages, strings.TrimPrefix(r, "GET /v1/sandboxes?"))
			}
			if !slices.Equal(pages, tt.wantPages) {
				t.Errorf("pages = %q, want %q", pages, tt.wantPages)
			}
		})
	}

	t.Run("iterate error", func(t *testing.T) {
		n := 0
		for sb, err := range c.Sandboxes.Iterate(t.Context(), platinum.ListOptions{State: "bogus"}) {
			n++
			if sb != nil || !platinum.IsCode(err, platinum.CodeInvalidRequest) {
				t.Errorf("yielded %v, %v; want nil, invalid_request", sb, err)
			}
		}
		if n != 1 {
			t.Errorf("yielded %d times, want 1", n)
		}
	})
}

func TestErrors(t *testing.T) {
	srv, c := newServer(t)
	stopped := running(t, c, platinum.CreateSandboxRequest{}).ID
	if _, err := c.Sandboxes.Stop(t.Context(), stopped, platinum.WaitForStopped(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	running := running(t, c, platinum.CreateSandboxRequest{}).ID
	bad := platinum.New(srv.URL, "wrong")
	admin := platinum.New(srv.URL, platinumtest.AdminToken)
	tests := []struct {
		name       string
		call       func(context.Context) error
		wantStatus int
		wantCode   string
		wantState  platinum.State
		wantMsg    string
	}{
		{"unauthorized", func(ctx context.Context) error {
			_, err := bad.Sandboxes.List(ctx, platinum.ListOptions{})
			return err
		}, 401, platinum.CodeUnauthorized, "", "Bearer $PT_TOKEN"},
		{"not found", func(ctx context.Context) error {
			_, err := c.Sandboxes.Get(ctx, "sbx_missing")
			return err
		}, 404, platinum.CodeNotFound, "", `sandbox "sbx_missing": not found`},
		{"not ready carries state", func(ctx context.Context) error {
			_, err := c.Sandboxes.Exec(ctx, stopped, platinum.ExecRequest{Cmd: []string{"true"}})
			return err
		}, 409, platinum.CodeSandboxNotReady, platinum.StateStopped, "it must be running"},
		{"conflict carries state", func(ctx context.Context) error {
			_, err := c.Sandboxes.Archive(ctx, running)
			return err
		}, 409, platinum.CodeConflict, platinum.StateRunning, "this needs it stopped"},
		{"forbidden", func(ctx context.Context) error {
			_, _, err := c.Orgs.Create(ctx, "acme")
			return err
		}, 403, platinum.CodeForbidden, "", "admin token"},
		{"admin may", func(ctx context.Context) error {
			org, tok, err := admin.Orgs.Create(ctx, "acme")
			if err == nil && (org.Name != "acme" || !strings.HasPrefix(org.ID, "org_") || !strings.HasPrefix(tok, "pt_")) {
				return fmt.Errorf("got %+v, %q", org, tok)
			}
			return err
		}, 0, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(t.Context())
			if tt.wantCode == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ae *platinum.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v (%T), want *APIError", err, err)
			}
			if ae.StatusCode != tt.wantStatus || ae.Code != tt.wantCode || ae.State() != tt.wantState || !strings.Contains(ae.Message, tt.wantMsg) {
				t.Errorf("APIError = %+v, want %d %s state %q message containing %q", ae, tt.wantStatus, tt.wantCode, tt.wantState, tt.wantMsg)
			}
			if !platinum.IsCode(err, tt.wantCode) || platinum.IsNotFound(err) != (tt.wantCode == platinum.CodeNotFound) {
				t.Errorf("IsCode/IsNotFound disagree with %v", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("(%s, HTTP %d)", tt.wantCode, tt.wantStatus)) {
				t.Errorf("Error() = %q, want code and status", err.Error())
			}
		})
	}
}
