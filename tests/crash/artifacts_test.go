package crash

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestKillDuringArtifactExport kills ptd while an export streams into the
// object store (a MiB in) and after the object is whole but before its
// record is written: after the restart no artifact is listed, the object
// and the temporary file are gone, and an export runs again whole. An
// export over --artifact-max-bytes is 413 artifact_too_large and leaves
// nothing behind either.
func TestKillDuringArtifactExport(t *testing.T) {
	d, a := startDaemon(t, "--artifact-max-bytes", "8388608")
	st, m := a.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox", "disk_gb": 1})
	if st != 201 {
		t.Fatalf("create: %d %v", st, m)
	}
	id := m["id"].(string)
	t.Cleanup(func() { a.try("DELETE", "/v1/sandboxes/"+id, nil, nil) })
	a.sh(id, "head -c 4194304 /dev/urandom > /root/blob; head -c 9437184 /dev/zero > /root/big")
	objects := filepath.Join(d.DataDir, "objects")
	leftovers := func() string {
		var found []string
		for _, dir := range []string{filepath.Join(objects, ".tmp"), filepath.Join(objects, "platinum-artifacts", "artifacts")} {
			filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
				if err == nil && !e.IsDir() {
					found = append(found, p)
				}
				return nil
			})
		}
		if len(found) > 0 {
			return fmt.Sprintf("leftovers of an interrupted export: %v", found)
		}
		return ""
	}
	listed := func() []any {
		_, l := a.do("GET", "/v1/artifacts?sandbox_id="+id, nil)
		rows, _ := l["rows"].([]any)
		if rows == nil {
			rows, _ = l["artifacts"].([]any)
		}
		return rows
	}

	for _, step := range []string{"artifact.streaming", "artifact.stored"} {
		armCrash(t, d, step)
		a.waitState(id, "running", 60*time.Second)
		if st, m, err := a.try("POST", "/v1/sandboxes/"+id+"/artifacts", map[string]any{"path": "/root/blob"}, nil); err == nil {
			t.Fatalf("%s: export answered %d %v; ptd should have died", step, st, m)
		}
		crashed(t, d, step)
		if rows := listed(); len(rows) != 0 {
			t.Errorf("%s: an interrupted export is listed: %v", step, rows)
		}
		eventually(t, 30*time.Second, leftovers)
	}

	// Over the cap: a clear 413, nothing stored.
	st, m = a.do("POST", "/v1/sandboxes/"+id+"/artifacts", map[string]any{"path": "/root/big"})
	if st != 413 || m["code"] != "artifact_too_large" || m["max_bytes"] != 8388608.0 {
		t.Errorf("export over the cap: %d %v", st, m)
	}
	if msg := leftovers(); msg != "" {
		t.Error("after a refused export: " + msg)
	}

	// The export works whole after the crashes.
	a.waitState(id, "running", 60*time.Second)
	st, art := a.do("POST", "/v1/sandboxes/"+id+"/artifacts", map[string]any{"path": "/root/blob"})
	if st != 201 || art["size_bytes"] != 4194304.0 {
		t.Fatalf("export after the crashes: %d %v", st, art)
	}
	sum := a.sh(id, "sha256sum /root/blob | cut -d' ' -f1")
	if got := art["sha256"].(string) + "\n"; got != sum {
		t.Errorf("artifact sha256 %q, file %q", got, sum)
	}
	if rows := listed(); len(rows) != 1 {
		t.Errorf("%d artifacts listed, want 1", len(rows))
	}
	a.do("DELETE", "/v1/artifacts/"+art["id"].(string), nil)
}
