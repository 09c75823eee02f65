package platinum_test

import (
	"io"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestConnect drives a sandbox through a handle, checking each call goes
// to the handle's sandbox.
func TestConnect(t *testing.T) {
	srv, c := newServer(t)
	ctx := t.Context()
	id := running(t, c, platinum.CreateSandboxRequest{CPU: 1, RAMMB: 512, DiskGB: 2, Env: map[string]string{"API_TOKEN": "old"}}).ID
	other := running(t, c, platinum.CreateSandboxRequest{}).ID
	// The sandboxes of platinumtest share the test machine's filesystem.
	file := filepath.Join(t.TempDir(), "a.txt")

	if _, err := c.Sandboxes.Connect(ctx, "sbx_missing"); !platinum.IsNotFound(err) {
		t.Errorf("Connect(unknown): err = %v, want not_found", err)
	}
	h, err := c.Sandboxes.Connect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if h.ID() != id {
		t.Fatalf("ID() = %q", h.ID())
	}
	start := len(srv.Requests())

	// The guide's env example (docs/env-and-secrets.md), through the handle.
	if res, err := h.SetEnv(ctx, map[string]*string{"API_TOKEN": new("new-value")}); err != nil || res.Applies != platinum.AppliesNextExec {
		t.Fatalf("SetEnv = %+v, %v", res, err)
	}
	if res, err := h.Exec(ctx, platinum.ExecRequest{Cmd: []string{"printenv", "API_TOKEN"}}); err != nil || res.Stdout != "new-value\n" {
		t.Errorf("Exec = %+v, %v", res, err)
	}
	var out strings.Builder
	if res, err := h.ExecStream(ctx, platinum.ExecRequest{Shell: "echo hi"}, &out, nil); err != nil || res.ExitCode != 0 || out.String() != "hi\n" {
		t.Errorf("ExecStream = %+v, %v, %q", res, err, out.String())
	}
	if err := h.Upload(ctx, file, strings.NewReader("data")); err != nil {
		t.Fatal(err)
	}
	rc, err := h.Download(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "data" {
		t.Errorf("Download = %q", b)
	}
	if sb, err := h.Rename(ctx, "ci-runner-2"); err != nil || sb.Name != "ci-runner-2" {
		t.Errorf("Rename = %+v, %v", sb, err)
	}
	if sb, err := h.SetAutoResume(ctx, false); err != nil || sb.AutoResume {
		t.Errorf("SetAutoResume = %+v, %v", sb, err)
	}
	if res, err := h.Resize(ctx, platinum.ResizeRequest{CPU: new(2.0)}); err != nil || res.CPU != 2 || res.AppliesAt != platinum.ResizeNow {
		t.Errorf("Resize = %+v, %v", res, err)
	}
	child, err := h.CreateChild(ctx, platinum.CreateSandboxRequest{Template: "busybox", ParentID: other}, platinum.WaitForRunning(0))
	if err != nil || child.ParentID != id {
		t.Fatalf("CreateChild = %+v, %v; want the handle's sandbox as parent", child, err)
	}
	if kids, err := h.Children(ctx); err != nil || len(kids) != 1 || kids[0].ID != child.ID {
		t.Errorf("Children = %v, %v", kids, err)
	}
	if _, err := h.Delete(ctx); !platinum.IsCode(err, platinum.CodeConflict) {
		t.Errorf("Delete with a live child: err = %v, want conflict", err)
	}
	if sb, err := h.Stop(ctx, platinum.WaitForStopped(time.Second)); err != nil || sb.State != platinum.StateStopped {
		t.Errorf("Stop = %+v, %v", sb, err)
	}
	if sb, err := h.Start(ctx, platinum.WaitForRunning(time.Second)); err != nil || sb.State != platinum.StateRunning {
		t.Errorf("Start = %+v, %v", sb, err)
	}
	if m, err := h.Metrics(ctx); err != nil || m.MemoryLimitBytes == 0 {
		t.Errorf("Metrics = %+v, %v", m, err)
	}
	if u, err := h.Usage(ctx, time.Time{}, time.Time{}); err != nil || u.ID != id {
		t.Errorf("Usage = %+v, %v", u, err)
	}
	if _, err := c.Sandboxes.Delete(ctx, child.ID); err != nil {
		t.Fatal(err)
	}
	if sb, err := h.Delete(ctx); err != nil || sb.State != platinum.StateDeleting {
		t.Errorf("Delete = %+v, %v", sb, err)
	}
	// The delete finishes in the background; then the sandbox is gone.
	deadline := time.Now().Add(30 * time.Second)
	for _, err := h.Get(ctx); !platinum.IsNotFound(err); _, err = h.Get(ctx) {
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("Get after Delete: err = %v, want not_found", err)
		}
		time.Sleep(5 * time.Millisecond)
	}

	p := "/v1/sandboxes/" + id
	want := []string{
		"PATCH " + p + "/env",
		"POST " + p + "/exec",
		"POST " + p + "/exec?stream=true",
		"PUT " + p + "/files?" + url.Values{"path": {file}}.Encode(),
		"GET " + p + "/files?" + url.Values{"path": {file}}.Encode(),
		"PATCH " + p,
		"PATCH " + p,
		"POST " + p + "/resize",
		"POST /v1/sandboxes?wait_for_state=running",
		"GET " + p + "/children",
		"DELETE " + p,
		"POST " + p + "/stop?wait_for_state=stopped&wait_timeout_ms=1000",
		"POST " + p + "/start?wait_for_state=running&wait_timeout_ms=1000",
		"GET " + p + "/metrics",
		"GET " + p + "/usage",
		"DELETE /v1/sandboxes/" + child.ID,
		"DELETE " + p,
	}
	got := srv.Requests()[start:]
	for len(got) > len(want) && got[len(got)-1] == "GET "+p {
		got = got[:len(got)-1]
	}
	if !slices.Equal(got, want) {
		t.Errorf("requests:\n got %q\nwant %q", got, want)
	}
}
