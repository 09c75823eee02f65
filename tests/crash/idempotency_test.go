package crash

import (
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// TestKillDuringKeyedCreate kills ptd while a create with an
// Idempotency-Key is in flight: after the key is claimed (nothing
// committed yet) and after the sandbox is committed but before the answer
// is kept. A retry with the same key right after the restart is never 409
// idempotency_key_in_progress (the dead process's claim is taken over at
// once), and the org ends with exactly one sandbox for the key.
func TestKillDuringKeyedCreate(t *testing.T) {
	d, _ := startDaemon(t)
	for _, step := range []string{"idempotency.claimed", "idempotency.answered"} {
		t.Run(step, func(t *testing.T) {
			a := &api{t: t, d: d}
			armCrash(t, d, step)
			key := "crash-" + ptdtest.RandHex(8)
			label := ptdtest.RandHex(6)
			body := map[string]any{"template": "busybox", "disk_gb": 1, "metadata": map[string]string{"crash": label}}
			hdr := map[string]string{"Idempotency-Key": key}
			if st, m, err := a.try("POST", "/v1/sandboxes", body, hdr); err == nil {
				t.Fatalf("the keyed create answered %d %v; ptd should have died at %s", st, m, step)
			}
			crashed(t, d, step)

			st, m, err := a.try("POST", "/v1/sandboxes", body, hdr)
			if err != nil || st != 201 {
				t.Fatalf("retry after the restart: %d %v %v", st, m, err)
			}
			id, _ := m["id"].(string)
			st, again, _ := a.try("POST", "/v1/sandboxes", body, hdr)
			if st != 201 || again["id"] != id {
				t.Errorf("second retry: %d id %v, want 201 %s", st, again["id"], id)
			}
			if rows := a.tagged("crash", label); len(rows) != 1 {
				t.Fatalf("%d sandboxes for one key, want 1: %v", len(rows), rows)
			}
			a.waitState(id, "running", 90*time.Second)
			a.do("DELETE", "/v1/sandboxes/"+id, nil)
		})
	}
}
