package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestEnvPatchKeepsRunningProcessesAndNeverEchoes: a patch reaches new
// commands only (a process already running keeps its environment), and
// no answer — create, get, list, child list, the patch itself — nor ptd's
// log carries a stored value.
func TestEnvPatchKeepsRunningProcessesAndNeverEchoes(t *testing.T) {
	c := newClient(t)
	boot, rotated, childVal := "boot-"+randHex(8), "rotated-"+randHex(8), "child-"+randHex(8)
	r := c.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox", "env": map[string]string{"API_TOKEN": boot}})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	bodies := [][]byte{r.Body}
	pid := strings.TrimSpace(c.mustSh(id, "sleep 600 </dev/null >/dev/null 2>&1 & echo $!"))
	r = c.do("PATCH", "/v1/sandboxes/"+id+"/env", map[string]any{"env": map[string]string{"API_TOKEN": rotated}})
	if r.Status != 200 || r.JSON()["applies"] != "next_exec" {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	bodies = append(bodies, r.Body)
	if out := c.mustSh(id, "echo $API_TOKEN"); out != rotated+"\n" {
		t.Errorf("a new command sees API_TOKEN=%q", out)
	}
	if out := c.mustSh(id, "tr '\\0' '\\n' </proc/"+pid+"/environ | grep ^API_TOKEN="); out != "API_TOKEN="+boot+"\n" {
		t.Errorf("the process running before the patch has %q, want its old value", out)
	}
	r = c.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox", "parent_id": id, "env": map[string]string{"CHILD_TOKEN": childVal}})
	if r.Status != 201 {
		t.Fatalf("child: %d %s", r.Status, r.Body)
	}
	child := r.JSON()["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+child, nil) })
	bodies = append(bodies, r.Body,
		c.do("GET", "/v1/sandboxes/"+id, nil).Body,
		c.do("GET", "/v1/sandboxes/"+child, nil).Body,
		c.do("GET", "/v1/sandboxes?limit=200", nil).Body,
		c.do("GET", "/v1/sandboxes?parent_id="+id, nil).Body,
		c.do("GET", "/v1/sandboxes/"+id+"/children", nil).Body)
	if !bytes.Contains(bodies[len(bodies)-1], []byte(child)) {
		t.Fatalf("children: %s", bodies[len(bodies)-1])
	}
	logs, err := os.ReadFile(filepath.Join(env.binDir, "ptd.log"))
	if err != nil {
		t.Fatal(err)
	}
	bodies = append(bodies, logs)
	for i, b := range bodies {
		for _, v := range []string{boot, rotated, childVal} {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("answer %d (or the log) carries an env value: %.300s", i, b)
			}
		}
	}
}

// TestEnvPatchDeletedDuringUpload: a body still uploading holds no lock, so
// a delete goes through meanwhile, and the patch then answers 404.
func TestEnvPatchDeletedDuringUpload(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	pr, pw := io.Pipe()
	req, err := http.NewRequest("PATCH", env.url+"/v1/sandboxes/"+id+"/env", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+env.token)
	req.Header.Set("Content-Type", "application/json")
	type answer struct {
		status int
		body   []byte
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- answer{status: resp.StatusCode, body: b}
	}()
	if _, err := pw.Write([]byte(`{"env":{"ROTATED":"`)); err != nil {
		t.Fatal(err)
	}
	if r := c.do("DELETE", "/v1/sandboxes/"+id, nil); r.Status != 202 {
		t.Fatalf("delete during the upload: %d %s", r.Status, r.Body)
	}
	pw.Write([]byte(`v"}}`))
	pw.Close()
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if m := (response{Body: a.body}).JSON(); a.status != 404 || m["code"] != "not_found" {
		t.Errorf("patch of a sandbox deleted during its upload: %d %s", a.status, a.body)
	}
}

// TestEnvPatchWhileStoppedWarm: a patch of a stopped sandbox (next_start)
// reaches the commands of a warm start (memory restored, no cold boot),
// while /etc/pt-env keeps the boot values until a cold boot.
func TestEnvPatchWhileStoppedWarm(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "env": map[string]string{"API_TOKEN": "boot"}})
	if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.Status != 200 {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	if r := c.do("PATCH", "/v1/sandboxes/"+id+"/env", map[string]any{"env": map[string]any{"API_TOKEN": "rotated"}}); r.JSON()["applies"] != "next_start" {
		t.Fatalf("patch while stopped: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil); r.JSON()["restore"] != "memory" {
		t.Fatalf("warm start: %s", r.Body)
	}
	if out := c.mustSh(id, `echo "$API_TOKEN"; . /etc/pt-env; echo "$API_TOKEN"`); out != "rotated\nboot\n" {
		t.Errorf("after a warm start: exec and /etc/pt-env say %q, want rotated then boot", out)
	}
}

// TestEnvPatchConcurrentThroughAPI: 24 disjoint patches sent at once over
// the API, plus one removal, all survive: each merges against the latest
// committed environment, in the record and in what new commands see.
func TestEnvPatchConcurrentThroughAPI(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "env": map[string]string{"KEEP": "1", "DROP": "x"}})
	const n = 24
	statuses := make(chan int, n+1)
	patch := func(body string) {
		req, _ := http.NewRequest("PATCH", env.url+"/v1/sandboxes/"+id+"/env", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+env.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			statuses <- -1
			return
		}
		resp.Body.Close()
		statuses <- resp.StatusCode
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { patch(fmt.Sprintf(`{"env":{"K%02d":"v%d"}}`, i, i)) })
	}
	wg.Go(func() { patch(`{"env":{"DROP":null}}`) })
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != 200 {
			t.Errorf("a concurrent patch answered %d", st)
		}
	}
	keys, _ := c.do("GET", "/v1/sandboxes/"+id, nil).JSON()["env_keys"].([]any)
	if len(keys) != n+1 || slices.Contains(keys, any("DROP")) || !slices.Contains(keys, any("KEEP")) {
		t.Errorf("env_keys after %d concurrent patches: %v", n+1, keys)
	}
	out := c.mustSh(id, `env | grep -c '^K[0-9][0-9]=v'; echo "${DROP-unset} $KEEP"`)
	if out != fmt.Sprintf("%d\nunset 1\n", n) {
		t.Errorf("a new command sees %q", out)
	}
}
