package crash

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestKillDuringPreviewAutoResume kills ptd right after preview traffic
// started a stopped sandbox (the start recorded, the sandbox not yet
// running): after the restart the sandbox settles running or stopped,
// never starting forever, and the next preview request is served by the
// sandbox's own server.
func TestKillDuringPreviewAutoResume(t *testing.T) {
	d, a := startDaemon(t)
	for round, memory := range []bool{true, false} {
		st, m := a.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox", "disk_gb": 1})
		if st != 201 {
			t.Fatalf("create: %d %v", st, m)
		}
		id := m["id"].(string)
		t.Cleanup(func() { a.try("DELETE", "/v1/sandboxes/"+id, nil, nil) })
		if st, m := a.do("POST", "/v1/sandboxes/"+id+"/preview-urls/8080", map[string]any{"public": true}); st/100 != 2 {
			t.Fatalf("make port public: %d %v", st, m)
		}
		// The sandbox's server: a warm stop keeps it in RAM, a cold one
		// (memory=false) loses it.
		a.sh(id, "mkdir -p /root/www && echo resumed > /root/www/index.html && httpd -p 8080 -h /root/www")
		stop := "/v1/sandboxes/" + id + "/stop?wait_for_state=stopped"
		if !memory {
			stop += "&memory=false"
		}
		a.do("POST", stop, nil)
		a.waitState(id, "stopped", 60*time.Second)

		armCrash(t, d, "preview.resuming")
		url := d.PreviewURL + "/" + id + "/8080/"
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			t.Fatalf("round %d: preview answered %d; ptd should have died", round, resp.StatusCode)
		}
		crashed(t, d, "preview.resuming")
		eventually(t, 90*time.Second, func() string {
			_, sb := a.do("GET", "/v1/sandboxes/"+id, nil)
			if sb["state"] != "running" && sb["state"] != "stopped" {
				return fmt.Sprintf("round %d: after a crash during auto-resume the sandbox is %v (%v)", round, sb["state"], sb["reason"])
			}
			return ""
		})
		if !memory {
			// A cold boot lost the server: start it again.
			a.waitState(id, "running", 60*time.Second)
			a.sh(id, "httpd -p 8080 -h /root/www")
		}
		eventually(t, 60*time.Second, func() string {
			resp, err := http.Get(url)
			if err != nil {
				return err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != "resumed" {
				return "preview after the restart: " + resp.Status + " " + string(b)
			}
			return ""
		})
	}
}
