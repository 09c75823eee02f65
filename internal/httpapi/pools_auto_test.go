package httpapi

import (
	"fmt"
	"testing"
)

// TestSetPoolAuto: PUT /v1/pools/{template} takes auto (docs/sessions.md,
// "Demand-sized pools"); GET /v1/pools lists auto, target, demand and
// refill_ms for every pool. An auto pool whose max is not above min_ready
// — or any pool whose max is under it — is refused 400 invalid_request
// naming max, and leaves the pool as it was.
func TestSetPoolAuto(t *testing.T) {
	srv, _, tok := newServer(t)
	for _, tc := range []struct {
		name, body string
		status     int
		want       string // the answer's auto, min_ready, max and target
	}{
		{"auto", `{"min_ready":0,"max":3,"auto":true}`, 200, "auto=true 0:3 target=0"},
		{"auto with max at min_ready", `{"min_ready":2,"max":2,"auto":true}`, 400, ""},
		{"auto without max", `{"min_ready":1,"auto":true}`, 400, ""},
		{"max under min_ready", `{"min_ready":3,"max":1,"auto":true}`, 400, ""},
		{"auto not a boolean", `{"min_ready":0,"max":3,"auto":"yes"}`, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, m := call(t, srv, tok, "PUT", "/v1/pools/busybox", tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("PUT %s: %d %v", tc.body, resp.StatusCode, m)
			}
			if tc.status == 400 && m["code"] != "invalid_request" {
				t.Errorf("refusal %v, want code invalid_request", m)
			}
			if got := fmt.Sprintf("auto=%v %v:%v target=%v", m["auto"], m["min_ready"], m["max"], m["target"]); tc.status == 200 && got != tc.want {
				t.Errorf("answer %s, want %s", got, tc.want)
			}
		})
	}
	resp, m := call(t, srv, tok, "GET", "/v1/pools", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/pools: %d %v", resp.StatusCode, m)
	}
	pools := m["pools"].([]any)
	if len(pools) != 1 {
		t.Fatalf("GET /v1/pools = %v, want the one pool", pools)
	}
	p := pools[0].(map[string]any)
	got := fmt.Sprintf("auto=%v %v:%v target=%v demand=%v refill_ms=%v", p["auto"], p["min_ready"], p["max"], p["target"], p["demand"], p["refill_ms"])
	if want := "auto=true 0:3 target=0 demand=0 refill_ms=10000"; got != want {
		t.Errorf("GET /v1/pools: %s, want %s (refused sets changed nothing)", got, want)
	}
}
