package platinum_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sessionServer answers session calls: a create that is provisioning,
// gets that report the statuses in order, and a status lookup.
func sessionServer(t *testing.T, statuses ...string) (*httptest.Server, *atomic.Int32) {
	var gets atomic.Int32
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		var in map[string]any
		json.NewDecoder(r.Body).Decode(&in)
		if in["vault_id"] != "v" || in["workflow_id"] != "wf" || r.URL.Query().Get("wait_timeout_ms") != "1500" {
			t.Errorf("create body %v query %v", in, r.URL.RawQuery)
		}
		write(w, 202, map[string]any{"session_id": "ses_1", "sessionId": "ses_1", "status": "provisioning", "vault_id": "v", "workflow_id": "wf"})
	})
	mux.HandleFunc("GET /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait_timeout_ms") == "" {
			t.Errorf("Wait did not ask the server to wait: %s", r.URL.RawQuery)
		}
		i := min(int(gets.Add(1))-1, len(statuses)-1)
		write(w, 200, map[string]any{"session_id": r.PathValue("id"), "status": statuses[i], "reason": "because"})
	})
	mux.HandleFunc("GET /v1/sessions/status", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("agent_session_id") != "chat" || r.URL.Query().Has("workflow_id") {
			t.Errorf("status query %v", r.URL.RawQuery)
		}
		write(w, 200, map[string]any{"status": "none", "session_id": nil})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &gets
}

func TestSessionsCreateAndWait(t *testing.T) {
	tests := []struct {
		name     string
		statuses []string
		wantErr  bool
		status   string
	}{
		{"becomes ready", []string{"provisioning", "ready"}, false, "ready"},
		{"fails with a reason", []string{"provisioning", "failed"}, true, "failed"},
		{"never ready within the timeout", []string{"provisioning"}, true, "provisioning"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := sessionServer(t, tc.statuses...)
			cl := platinum.New(srv.URL, "tok")
			ctx := context.Background()
			ses, err := cl.Sessions.Create(ctx, platinum.SessionCreateRequest{
				SessionContext: platinum.SessionContext{VaultID: "v", WorkflowID: "wf"}, Wait: 1500 * time.Millisecond})
			if err != nil || ses.SessionID != "ses_1" || ses.Ready() {
				t.Fatalf("Create = %+v, %v; want provisioning ses_1", ses, err)
			}
			got, err := cl.Sessions.Wait(ctx, ses.SessionID, 50*time.Millisecond)
			if (err != nil) != tc.wantErr || got == nil || got.Status != tc.status {
				t.Fatalf("Wait = %+v, %v; want status %s (error %v)", got, err, tc.status, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, platinum.ErrSessionNotReady) {
				t.Errorf("Wait error %v does not wrap ErrSessionNotReady", err)
			}
		})
	}
}

func TestSessionsStatusOfUnknownContext(t *testing.T) {
	srv, _ := sessionServer(t, "ready")
	cl := platinum.New(srv.URL, "tok")
	got, err := cl.Sessions.Status(context.Background(), platinum.SessionContext{VaultID: "v", AgentSessionID: "chat"})
	if err != nil || got.Status != platinum.SessionNone || got.SessionID != "" {
		t.Fatalf("Status = %+v, %v; want none", got, err)
	}
}

// TestPoolsSetForRuntime: Set configures the default class's pool (no
// runtime in the body) and SetForRuntime names the class; the answer's
// runtime comes back on Pool.
func TestPoolsSetForRuntime(t *testing.T) {
	tests := []struct {
		name    string
		runtime string // "" calls Set
	}{
		{"default class", ""},
		{"gvisor", "gvisor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("PUT /v1/pools/{template}", func(w http.ResponseWriter, r *http.Request) {
				var in map[string]any
				json.NewDecoder(r.Body).Decode(&in)
				got, has := in["runtime"]
				if (tc.runtime == "") == has || (has && got != tc.runtime) || in["min_ready"] != 1.0 || in["max"] != 2.0 {
					t.Errorf("body %v, want runtime %q", in, tc.runtime)
				}
				rt := tc.runtime
				if rt == "" {
					rt = "runc"
				}
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"template": r.PathValue("template"), "runtime": rt, "min_ready": 1, "max": 2, "source": "api"})
			})
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			cl := platinum.New(srv.URL, "tok")
			var p *platinum.Pool
			var err error
			if tc.runtime == "" {
				p, err = cl.Pools.Set(context.Background(), "busybox", 1, 2)
			} else {
				p, err = cl.Pools.SetForRuntime(context.Background(), "busybox", tc.runtime, 1, 2)
			}
			if err != nil || p.Template != "busybox" || p.Runtime == "" || (tc.runtime != "" && p.Runtime != tc.runtime) {
				t.Fatalf("= %+v, %v", p, err)
			}
		})
	}
}

// TestPoolsSetWithAuto: SetWith sends auto (only when set) and the
// answer's auto, target and demand come back on Pool.
func TestPoolsSetWithAuto(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/pools/{template}", func(w http.ResponseWriter, r *http.Request) {
		var in map[string]any
		json.NewDecoder(r.Body).Decode(&in)
		if in["auto"] != true || in["min_ready"] != 0.0 || in["max"] != 3.0 || in["runtime"] != "gvisor" {
			t.Errorf("body %v, want an auto gvisor pool 0:3", in)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"template": "busybox", "runtime": "gvisor", "min_ready": 0, "max": 3,
			"auto": true, "target": 2, "demand": 5, "refill_ms": 1200, "source": "api"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p, err := platinum.New(srv.URL, "tok").Pools.SetWith(context.Background(), "busybox", platinum.PoolSettings{Runtime: "gvisor", Max: 3, Auto: true})
	if err != nil || !p.Auto || p.Target != 2 || p.Demand != 5 || p.RefillMs != 1200 {
		t.Fatalf("SetWith = %+v, %v", p, err)
	}
}
