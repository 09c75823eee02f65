package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestAutoPool (docs/sessions.md, "Demand-sized pools"): an auto busybox
// pool (min_ready 0, max 3) starts with a target within its bounds (the
// busybox creates of earlier tests in the last five minutes are demand
// too); a burst of creates that find it empty (cold, each one demand)
// raises its target to max,
// and the refill fills it to that many ready sandboxes, which GET
// /v1/pools, GET /v1/hosts and /metrics all show.
func TestAutoPool(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	drainPool(t, c)
	r := c.do("PUT", "/v1/pools/"+sessionTemplate, map[string]any{"min_ready": 0, "max": 3, "auto": true})
	if m := r.JSON(); r.Status != 200 || m["auto"] != true || m["target"].(float64) < 0 || m["target"].(float64) > 3 {
		t.Fatalf("PUT an auto pool: %d %s", r.Status, r.Body)
	}
	t.Cleanup(func() { drainPool(t, c) })

	// The burst: creates that do not wait for their boots, so they come
	// within one refill time.
	for range 4 {
		r := c.do("POST", "/v1/sandboxes", map[string]any{"template": sessionTemplate})
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		id := r.JSON()["id"].(string)
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	}

	pool := func() map[string]any {
		r := c.do("GET", "/v1/pools", nil)
		for _, p := range r.JSON()["pools"].([]any) {
			if m := p.(map[string]any); m["template"] == sessionTemplate && m["runtime"] == harnessDefaultClass {
				return m
			}
		}
		t.Fatalf("GET /v1/pools has no %s pool: %s", sessionTemplate, r.Body)
		return nil
	}
	var p map[string]any
	for deadline := time.Now().Add(3 * time.Minute); ; sleep(200) {
		p = pool()
		if p["target"] == 3.0 && p["ready"] == 3.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the auto pool after a burst of 4 creates: %v; want target 3 (max) and 3 ready", p)
		}
	}
	if p["demand"].(float64) < 4 || p["refill_ms"].(float64) <= 0 {
		t.Errorf("the auto pool's demand %v and refill_ms %v, want at least the 4 creates and a refill time", p["demand"], p["refill_ms"])
	}

	hosts := c.do("GET", "/v1/hosts", nil).JSON()["rows"].([]any)
	found := false
	for _, h := range hosts {
		wp, _ := h.(map[string]any)["warm_pools"].([]any)
		for _, x := range wp {
			if m := x.(map[string]any); m["template"] == sessionTemplate && m["runtime"] == harnessDefaultClass {
				found = m["auto"] == true && m["target"] == 3.0
			}
		}
	}
	if !found {
		t.Errorf("GET /v1/hosts does not show the auto pool with target 3: %v", hosts)
	}
	series := fmt.Sprintf(`platinum_warm_pool_target{runtime="%s",template="%s"}`, harnessDefaultClass, sessionTemplate)
	if v := metricValue(scrapeMetrics(t, env.metricsURL, ""), series); v != "3" {
		t.Errorf("/metrics %s = %q, want 3", series, v)
	}
}
