package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// ownersAPI is a /v1 with three running sandboxes: one made through MCP
// with alice's token, one with bob's, one not through MCP. It records the
// deletes and the metadata a fork asks for.
type ownersAPI struct {
	mu           sync.Mutex
	deleted      []string
	forkMetadata map[string]string
}

var owners = map[string]string{"sbx_alice": CallerID("alice"), "sbx_bob": CallerID("bob"), "sbx_none": ""}

func (f *ownersAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	id, verb, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/sandboxes/"), "/")
	label, ok := owners[id]
	if !ok {
		w.WriteHeader(404)
		fmt.Fprintf(w, `{"error":"sandbox %s not found","code":"not_found"}`, id)
		return
	}
	md := map[string]string{"team": "t"}
	if label != "" {
		md[CreatedLabel] = label
	}
	sb := map[string]any{"id": id, "state": "running", "template": "busybox", "metadata": md}
	switch r.Method + " " + verb {
	case "GET ":
	case "DELETE ":
		f.deleted = append(f.deleted, id)
		sb["state"] = "deleting"
	case "POST fork":
		var body struct{ Metadata map[string]string }
		json.NewDecoder(r.Body).Decode(&body)
		f.forkMetadata = body.Metadata
		maps.Copy(md, body.Metadata)
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(map[string]any{"source_id": id, "memory": false,
			"sandboxes": []any{map[string]any{"id": "sbx_copy", "state": "running", "template": "busybox", "metadata": md}}})
		return
	default:
		w.WriteHeader(405)
		fmt.Fprint(w, `{"error":"no route","code":"method_not_allowed"}`)
		return
	}
	json.NewEncoder(w).Encode(sb)
}

func (f *ownersAPI) deletes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deleted)
}

// callText calls a tool and returns whether it failed and its text.
func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (bool, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return res.IsError, b.String()
}

// TestDeleteGuardByCaller: delete_sandbox deletes only what the caller's
// own token made through MCP, on a pt mcp-style server (one caller) and
// on the /mcp handler (a caller per request), unless AllowDeleteAny.
func TestDeleteGuardByCaller(t *testing.T) {
	// connect returns a session acting for token.
	type connector func(t *testing.T, api http.Handler, token string, allowAny bool) *mcp.ClientSession
	single := func(t *testing.T, api http.Handler, token string, allowAny bool) *mcp.ClientSession {
		srv := httptest.NewServer(api)
		t.Cleanup(srv.Close)
		st, ct := mcp.NewInMemoryTransports()
		ss, err := New(platinum.New(srv.URL, token), Options{CallerID: CallerID(token), AllowDeleteAny: allowAny}).Connect(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	shared := func(t *testing.T, api http.Handler, token string, allowAny bool) *mcp.ClientSession {
		h := NewHTTPHandler(HTTPOptions{API: api, AllowDeleteAny: allowAny, Authenticate: func(_ context.Context, tok string) (string, error) {
			return "id-" + tok, nil
		}})
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		t.Cleanup(h.Shutdown)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: tokenRT(token)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	for name, connect := range map[string]connector{"single caller": single, "http handler": shared} {
		t.Run(name, func(t *testing.T) {
			api := &ownersAPI{}
			alice := connect(t, api, "alice", false)
			for _, c := range []struct {
				id, refusal string // refusal "" means deleted
			}{
				{"sbx_bob", "was created through MCP with another token"},
				{"sbx_none", "was not created through MCP"},
				{"sbx_alice", ""},
			} {
				failed, text := callText(t, alice, "delete_sandbox", map[string]any{"sandbox_id": c.id})
				if c.refusal == "" && failed {
					t.Errorf("alice deleting %s: %s", c.id, text)
				}
				if c.refusal != "" && (!failed || !strings.HasPrefix(text, "[forbidden] sandbox "+c.id+" "+c.refusal) || !strings.Contains(text, "--allow-delete-any")) {
					t.Errorf("alice deleting %s: failed %v, %q; want [forbidden] … %s", c.id, failed, text, c.refusal)
				}
			}
			if got := api.deletes(); !slices.Equal(got, []string{"sbx_alice"}) {
				t.Errorf("without AllowDeleteAny /v1 saw deletes of %v, want only sbx_alice", got)
			}

			// What get_sandbox says matches what delete_sandbox does.
			for id, want := range map[string][2]bool{"sbx_alice": {true, true}, "sbx_bob": {true, false}, "sbx_none": {false, false}} {
				_, text := callText(t, alice, "get_sandbox", map[string]any{"sandbox_id": id})
				var out struct {
					CreatedByMCP bool `json:"created_by_mcp"`
					CreatedByYou bool `json:"created_by_you"`
				}
				json.Unmarshal([]byte(text), &out)
				if out.CreatedByMCP != want[0] || out.CreatedByYou != want[1] {
					t.Errorf("get_sandbox %s for alice: %s; want created_by_mcp %v, created_by_you %v", id, text, want[0], want[1])
				}
			}

			// alice's fork of bob's sandbox is alice's.
			failed, text := callText(t, alice, "fork_sandbox", map[string]any{"sandbox_id": "sbx_bob"})
			if failed || !strings.Contains(text, `"created_by_you":true`) {
				t.Errorf("fork of bob's sandbox by alice: %v %s", failed, text)
			}
			if api.forkMetadata[CreatedLabel] != CallerID("alice") || len(api.forkMetadata) != 1 {
				t.Errorf("fork asked for metadata %v, want only alice's label", api.forkMetadata)
			}

			anyAPI := &ownersAPI{}
			bob := connect(t, anyAPI, "bob", true)
			for _, id := range []string{"sbx_alice", "sbx_none"} {
				if failed, text := callText(t, bob, "delete_sandbox", map[string]any{"sandbox_id": id}); failed {
					t.Errorf("bob with AllowDeleteAny deleting %s: %s", id, text)
				}
			}
			if got := anyAPI.deletes(); !slices.Equal(got, []string{"sbx_alice", "sbx_none"}) {
				t.Errorf("with AllowDeleteAny /v1 saw deletes of %v", got)
			}
		})
	}
}

// TestCallerID: one ID per token, the same with the white space ptd
// ignores, never containing the token.
func TestCallerID(t *testing.T) {
	a, b := CallerID("pt_aaaa"), CallerID("pt_bbbb")
	if a == b || a != CallerID(" pt_aaaa\n") || len(a) != len("tfp_")+32 || !strings.HasPrefix(a, "tfp_") {
		t.Errorf("CallerID: %q, %q, %q", a, b, CallerID(" pt_aaaa\n"))
	}
	if strings.Contains(a, "aaaa") {
		t.Errorf("CallerID %q shows the token", a)
	}
}
