package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// buildingAPI is a /v1 whose busybox template is still building: a new
// sandbox stays creating for a number of reads, then runs (or never, when
// polls is 0). It records deletes and the create's metadata.
type buildingAPI struct {
	mu       sync.Mutex
	polls    int
	reads    int
	deleted  []string
	metadata map[string]string
}

func (f *buildingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	sb := map[string]any{"id": "sbx_1", "template": "busybox", "state": "creating"}
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/sandboxes":
		var body struct{ Metadata map[string]string }
		json.NewDecoder(r.Body).Decode(&body)
		f.metadata = body.Metadata
		w.WriteHeader(201)
	case r.Method == "GET" && r.URL.Path == "/v1/sandboxes/sbx_1":
		f.reads++
		if f.polls > 0 && f.reads >= f.polls {
			sb["state"] = "running"
		}
	case r.Method == "GET" && r.URL.Path == "/v1/templates/busybox":
		json.NewEncoder(w).Encode(map[string]any{"slug": "busybox", "status": "building", "progress": "unpacking 3/7"})
		return
	case r.Method == "DELETE" && r.URL.Path == "/v1/sandboxes/sbx_1":
		f.deleted = append(f.deleted, "sbx_1")
		sb["state"] = "deleting"
	default:
		w.WriteHeader(404)
		json.NewEncoder(w).Encode(map[string]string{"error": "no route", "code": "not_found"})
		return
	}
	json.NewEncoder(w).Encode(sb)
}

// connectTo runs a Server over c on an in-memory transport and returns a
// client session and the progress messages it receives.
func connectTo(t *testing.T, c *platinum.Client) (*mcp.ClientSession, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var msgs []string
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(c, Options{CallerID: CallerID("tok")}).Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			msgs = append(msgs, r.Params.Message)
			mu.Unlock()
		},
	}).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), msgs...) }
}

// TestCreateReportsTemplateBuild: while the template builds, progress
// says so; the sandbox gets the label whatever metadata the model sent.
func TestCreateReportsTemplateBuild(t *testing.T) {
	api := &buildingAPI{polls: 3}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cs, progress := connectTo(t, platinum.New(srv.URL, "tok"))
	p := &mcp.CallToolParams{Name: "create_sandbox", Arguments: map[string]any{
		"template": "busybox", "metadata": map[string]any{CreatedLabel: "0", "k": "v"}}}
	p.SetProgressToken("c")
	res, err := cs.CallTool(context.Background(), p)
	if err != nil || res.IsError {
		t.Fatalf("create: %+v, %v", res, err)
	}
	want := []string{"sandbox sbx_1 created from busybox, booting", "building template busybox: unpacking 3/7", "sandbox sbx_1 is running"}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Join(progress(), "|") != strings.Join(want, "|") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := progress(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("progress %q, want %q", got, want)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.metadata[CreatedLabel] != CallerID("tok") || api.metadata["k"] != "v" {
		t.Errorf("create sent metadata %v", api.metadata)
	}
}

// TestCreateCancelledDeletes: a create cancelled before the sandbox runs
// deletes it, since nobody learnt its ID.
func TestCreateCancelledDeletes(t *testing.T) {
	api := &buildingAPI{} // never runs
	srv := httptest.NewServer(api)
	defer srv.Close()
	cs, _ := connectTo(t, platinum.New(srv.URL, "tok"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			api.mu.Lock()
			n := api.reads
			api.mu.Unlock()
			if n >= 2 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_sandbox", Arguments: map[string]any{"template": "busybox"}}); err == nil {
		t.Fatal("cancelled create returned no error")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		api.mu.Lock()
		n := len(api.deleted)
		api.mu.Unlock()
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled create's sandbox was not deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
