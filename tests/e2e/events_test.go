package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sseEvent is one message of GET /v1/events.
type sseEvent struct {
	ID        int64           // the id: line
	Event     string          // the event: line
	Type      string          `json:"type"`
	BodyID    int64           `json:"id"`
	SandboxID string          `json:"sandbox_id"`
	OrgID     string          `json:"org_id"`
	Data      json.RawMessage `json:"data"`
	CreatedAt string          `json:"created_at"`
}

func (e sseEvent) change() string {
	var d struct{ From, To string }
	json.Unmarshal(e.Data, &d)
	return d.From + "→" + d.To
}

// sseConn is an open event stream read on its own goroutine.
type sseConn struct {
	t          *testing.T
	events     chan sseEvent
	heartbeats chan struct{}
	cancel     context.CancelFunc
}

// openEvents opens GET /v1/events?query with token, sending lastID as
// Last-Event-ID when it is non-empty. The stream closes when the test ends.
func openEvents(t *testing.T, token, query, lastID string) *sseConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", env.url+"/v1/events?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		t.Fatalf("GET /v1/events?%s: %d %s", query, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	c := &sseConn{t: t, events: make(chan sseEvent, 1000), heartbeats: make(chan struct{}, 1000), cancel: cancel}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var cur sseEvent
		var data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == ": heartbeat":
				c.heartbeats <- struct{}{}
			case strings.HasPrefix(line, "id: "):
				cur.ID, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				cur.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case line == "" && data != "":
				if err := json.Unmarshal([]byte(data), &cur); err != nil {
					t.Errorf("event data %q: %v", data, err)
				}
				c.events <- cur
				cur, data = sseEvent{}, ""
			}
		}
	}()
	return c
}

// next returns the next event, failing the test if none comes within a
// generous bound (a wait, not a speed assertion).
func (c *sseConn) next() sseEvent {
	c.t.Helper()
	select {
	case e, ok := <-c.events:
		if !ok {
			c.t.Fatal("event stream closed")
		}
		return e
	case <-time.After(3 * time.Minute):
		c.t.Fatal("no event within 3 minutes")
	}
	return sseEvent{}
}

// none checks that no event arrives before the stream's next heartbeat.
func (c *sseConn) none() {
	c.t.Helper()
	for {
		select {
		case e := <-c.events:
			c.t.Fatalf("unexpected event %+v", e)
		case <-c.heartbeats:
			select {
			case e := <-c.events:
				c.t.Fatalf("unexpected event %+v", e)
			default:
				return
			}
		case <-time.After(time.Minute):
			c.t.Fatal("no heartbeat within a minute")
		}
	}
}

// lastEventID returns the newest event ID the token's org has.
func lastEventID(t *testing.T, c *client) int64 {
	t.Helper()
	var after int64
	for {
		r := c.do("GET", fmt.Sprintf("/v1/events?format=json&limit=1000&after=%d", after), nil)
		if r.Status != 200 {
			t.Fatalf("events page: %d %s", r.Status, r.Body)
		}
		var page struct {
			Rows      []sseEvent `json:"rows"`
			NextAfter int64      `json:"next_after"`
		}
		json.Unmarshal(r.Body, &page)
		if len(page.Rows) == 0 {
			return after
		}
		after = page.NextAfter
	}
}

// TestEventsStream follows one sandbox through create and stop on the SSE
// feed, resumes with Last-Event-ID, filters, and checks another org sees
// none of it.
func TestEventsStream(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	start := lastEventID(t, c)
	all := openEvents(t, env.token, "type=state_changed&heartbeat_ms=500", strconv.FormatInt(start, 10))

	r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox"})
	if r.Status != 201 && r.Status != 202 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	var mine []sseEvent
	wait := func(to string) {
		t.Helper()
		for {
			e := all.next()
			if e.Type != "state_changed" || e.Event != "state_changed" || e.ID != e.BodyID || e.ID <= start {
				t.Fatalf("bad message %+v", e)
			}
			if e.SandboxID != id {
				continue // other tests' sandboxes
			}
			mine = append(mine, e)
			if strings.HasSuffix(e.change(), "→"+to) {
				return
			}
		}
	}
	wait("running")
	if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped&wait_timeout_ms=120000", nil); r.Status != 200 {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	wait("stopped")
	var changes []string
	for i, e := range mine {
		changes = append(changes, e.change())
		if i > 0 && e.ID <= mine[i-1].ID {
			t.Errorf("event IDs not increasing: %d after %d", e.ID, mine[i-1].ID)
		}
	}
	if diff := cmp.Diff([]string{"creating→running", "running→stopping", "stopping→stopped"}, changes); diff != "" {
		t.Fatalf("transitions (-want +got):\n%s", diff)
	}

	// Resume after the first event: only the missed ones, in order.
	resumed := openEvents(t, env.token, "sandbox_id="+id+"&type=state_changed&heartbeat_ms=500", strconv.FormatInt(mine[0].ID, 10))
	for _, want := range mine[1:] {
		if got := resumed.next(); got.ID != want.ID || got.change() != want.change() {
			t.Fatalf("resumed: got %d %s, want %d %s", got.ID, got.change(), want.ID, want.change())
		}
	}
	resumed.none()

	// ?after= works like Last-Event-ID for the JSON page.
	r = c.do("GET", fmt.Sprintf("/v1/events?format=json&sandbox_id=%s&type=state_changed&after=%d", id, mine[1].ID), nil)
	var page struct {
		Rows []sseEvent `json:"rows"`
	}
	json.Unmarshal(r.Body, &page)
	if len(page.Rows) != 1 || page.Rows[0].BodyID != mine[2].ID {
		t.Errorf("page after %d: %s", mine[1].ID, r.Body)
	}

	// Filters: this sandbox only (every type of event it had); a type it
	// never had gives nothing.
	r = c.do("GET", fmt.Sprintf("/v1/events?format=json&sandbox_id=%s&after=%d", id, start), nil)
	page.Rows = nil
	json.Unmarshal(r.Body, &page)
	filtered := openEvents(t, env.token, "sandbox_id="+id+"&heartbeat_ms=500", strconv.FormatInt(start, 10))
	for _, want := range page.Rows {
		if e := filtered.next(); e.SandboxID != id || e.ID != want.BodyID {
			t.Fatalf("sandbox filter: got %+v, want event %d", e, want.BodyID)
		}
	}
	if len(page.Rows) < len(mine) {
		t.Errorf("sandbox filter: %d events, fewer than its %d state changes", len(page.Rows), len(mine))
	}
	filtered.none()
	openEvents(t, env.token, "sandbox_id="+id+"&type=start_ram_not_restored&heartbeat_ms=500", "0").none()

	// Another org sees none of it, even asking by sandbox ID.
	_, other := createOrg(t, c, "events-other-"+randHex(3))
	otherTok := other.token
	openEvents(t, otherTok, "heartbeat_ms=500", "0").none()
	openEvents(t, otherTok, "sandbox_id="+id+"&heartbeat_ms=500", "0").none()
	if r := other.do("GET", "/v1/events?format=json", nil); r.Status != 200 || strings.Contains(string(r.Body), id) {
		t.Errorf("other org's page: %d %s", r.Status, r.Body)
	}
	// Its own sandbox's events reach it and only it.
	otherAll := openEvents(t, otherTok, "heartbeat_ms=500", "0")
	r = other.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox"})
	if r.Status != 201 && r.Status != 202 {
		t.Fatalf("other create: %d %s", r.Status, r.Body)
	}
	oid := r.JSON()["id"].(string)
	t.Cleanup(func() { other.do("DELETE", "/v1/sandboxes/"+oid, nil) })
	if e := otherAll.next(); e.SandboxID != oid || e.OrgID == "" {
		t.Errorf("other org's first event: %+v", e)
	}

	// Bad cursors are refused.
	for _, q := range []string{"after=-1", "after=x", "format=xml", "format=json&limit=0"} {
		if r := c.do("GET", "/v1/events?"+q, nil); r.Status != 400 || r.JSON()["code"] != "invalid_request" {
			t.Errorf("%s: %d %s", q, r.Status, r.Body)
		}
	}
}

// TestEventsCLIFollow runs `pt events --follow --json` and sees a new
// sandbox's events arrive.
func TestEventsCLIFollow(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	start := lastEventID(t, c)
	id := c.create(map[string]any{"template": "busybox"})
	out := runPTLines(t, "events", "--follow", "--json", "--type", "state_changed", "--sandbox", id, "--after", strconv.FormatInt(start, 10))
	var line string
	select {
	case line = <-out:
	case <-time.After(time.Minute):
		t.Fatal("pt events --follow printed nothing within a minute")
	}
	var e sseEvent
	if err := json.Unmarshal([]byte(line), &e); err != nil || e.SandboxID != id || e.change() != "creating→running" {
		t.Fatalf("pt events line %q: %+v %v", line, e, err)
	}
}

// runPTLines starts the pt binary and sends each stdout line to the
// returned channel; the process is killed when the test ends.
func runPTLines(t *testing.T, args ...string) <-chan string {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.binDir, "pt"), args...)
	cmd.Env = append(os.Environ(), "PT_API_URL="+env.url, "PT_TOKEN="+env.token)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// TestEventsSessionFilter follows a session's status changes by its
// context (workflow and vault) and by session ID; another context's
// stream stays empty.
func TestEventsSessionFilter(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	start := strconv.FormatInt(lastEventID(t, c), 10)
	wf, vault := "wf-ev-"+randHex(4), "vault-ev-"+randHex(4)
	byCtx := openEvents(t, env.token, "workflow_id="+wf+"&vault_id="+vault+"&heartbeat_ms=500", start)
	otherCtx := openEvents(t, env.token, "workflow_id=wf-none-"+randHex(4)+"&heartbeat_ms=500", start)

	r := c.do("POST", "/v1/sessions", map[string]any{"workflow_id": wf, "vault_id": vault, "template": "busybox"})
	if r.Status != 200 && r.Status != 202 {
		t.Fatalf("create session: %d %s", r.Status, r.Body)
	}
	sid := r.JSON()["session_id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sessions/"+sid+"?wait_timeout_ms=60000", nil) })

	type sessionData struct {
		SessionID  string `json:"session_id"`
		WorkflowID string `json:"workflow_id"`
		VaultID    string `json:"vault_id"`
		Status     string `json:"status"`
	}
	var statuses []string
	for {
		e := byCtx.next()
		var d sessionData
		json.Unmarshal(e.Data, &d)
		if e.Type != "session_status_changed" || d.SessionID != sid || d.WorkflowID != wf || d.VaultID != vault {
			t.Fatalf("context filter let through %s %s", e.Type, e.Data)
		}
		statuses = append(statuses, d.Status)
		if d.Status == "ready" || d.Status == "failed" {
			break
		}
	}
	if statuses[len(statuses)-1] != "ready" {
		t.Fatalf("session statuses %v, want it to end ready", statuses)
	}
	otherCtx.none()

	r = c.do("GET", "/v1/events?format=json&session_id="+sid+"&after="+start, nil)
	var page struct {
		Rows []sseEvent `json:"rows"`
	}
	json.Unmarshal(r.Body, &page)
	if len(page.Rows) != len(statuses) {
		t.Errorf("session_id filter: %d events, the context stream had %d: %s", len(page.Rows), len(statuses), r.Body)
	}
}
