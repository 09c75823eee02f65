package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// buildLogEvent is one Server-Sent Event of a build log stream.
type buildLogEvent struct {
	id, event string
	line      map[string]any
}

// openBuildLogSSE opens a build's log as Server-Sent Events, the way the
// dashboard follows GET /v1/events: fetch with Accept: text/event-stream.
func (c *client) openBuildLogSSE(ctx context.Context, slug, id, query, lastID string) (*http.Response, func() (buildLogEvent, bool)) {
	c.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", env.url+"/v1/templates/"+slug+"/builds/"+id+"/logs"+query, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("logs as SSE: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	next := func() (buildLogEvent, bool) {
		var ev buildLogEvent
		for sc.Scan() {
			l := sc.Text()
			switch {
			case l == "":
				if ev.line != nil {
					return ev, true
				}
			case strings.HasPrefix(l, "id: "):
				ev.id = l[4:]
			case strings.HasPrefix(l, "event: "):
				ev.event = l[7:]
			case strings.HasPrefix(l, "data: "):
				if err := json.Unmarshal([]byte(l[6:]), &ev.line); err != nil {
					c.t.Fatalf("data %q: %v", l, err)
				}
			}
		}
		return ev, false
	}
	return resp, next
}

// TestTemplateBuildLogStream follows a Dockerfile build's log while it
// runs: a RUN's first output line arrives while the build is still
// running (the log streams, it is not sent at the end), the same lines
// come as Server-Sent Events with the seq as the event ID, and a
// reconnect with Last-Event-ID resumes right after the line it names.
func TestTemplateBuildLogStream(t *testing.T) {
	c := newClient(t)
	slug := c.slugFor("logs")
	b := c.startBuild(map[string]any{"slug": slug, "dockerfile": "FROM busybox\nRUN echo first-line; sleep 8; echo second-line\nENV DONE=1\n"})
	id := b["id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	_, next := c.openBuildLogSSE(ctx, slug, id, "?follow=true", "")
	var evs []buildLogEvent
	sawLive := false
	for {
		ev, ok := next()
		if !ok {
			break
		}
		evs = append(evs, ev)
		if ev.event == "output" && strings.Contains(ev.line["text"].(string), "first-line") {
			// The RUN still sleeps: the build must still be running.
			r := c.do("GET", "/v1/templates/"+slug+"/builds/"+id, nil)
			if st := r.JSON()["status"]; st != "running" {
				t.Errorf("build %v when its first RUN line streamed, want running", st)
			}
			sawLive = true
		}
	}
	if !sawLive {
		t.Fatalf("no first-line output event: %v", evs)
	}
	last := evs[len(evs)-1]
	if last.event != "done" || last.line["status"] != "ready" || last.line["version_id"] == nil {
		t.Fatalf("the stream did not end with a ready done event: %+v", last)
	}
	for i, ev := range evs {
		if ev.id != strconv.Itoa(i+1) || ev.line["seq"] != float64(i+1) || ev.event != ev.line["type"] {
			t.Fatalf("event %d: id %q event %q, line %v; want id = seq = %d and event = type", i, ev.id, ev.event, ev.line, i+1)
		}
	}
	steps := 0
	for _, ev := range evs {
		if ev.event == "step" {
			steps++
		}
	}
	if steps != 2 {
		t.Errorf("%d step events, want 2 (RUN, ENV)", steps)
	}

	// A reconnect after line 2 gets line 3 onwards, the same lines.
	_, next = c.openBuildLogSSE(ctx, slug, id, "", "2")
	var again []buildLogEvent
	for ev, ok := next(); ok; ev, ok = next() {
		again = append(again, ev)
	}
	if len(again) != len(evs)-2 || again[0].id != "3" || again[len(again)-1].event != "done" {
		t.Fatalf("resumed after 2: %d events from %+v, want %d from id 3", len(again), again[0], len(evs)-2)
	}

	// format=sse without the Accept header, and a bad Last-Event-ID.
	if r := c.do("GET", "/v1/templates/"+slug+"/builds/"+id+"/logs?format=xml", nil); r.Status != 400 {
		t.Errorf("format=xml: %d %s", r.Status, r.Body)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", env.url+"/v1/templates/"+slug+"/builds/"+id+"/logs?format=sse", nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Last-Event-ID", "x")
	if st := statusOf(t, req); st != 400 {
		t.Errorf("Last-Event-ID x: %d, want 400", st)
	}
}
