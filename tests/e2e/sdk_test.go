package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestGoSDK drives a real ptd with the public Go SDK.
func TestGoSDK(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	cl := platinum.New(env.url, env.token)
	sb, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Env: map[string]string{"K": "v"}},
		platinum.WaitForRunning(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
	if sb.State != platinum.StateRunning {
		t.Fatalf("state = %s", sb.State)
	}
	res, err := cl.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "echo $K; exit 4"})
	if err != nil || res.Stdout != "v\n" || res.ExitCode != 4 {
		t.Fatalf("exec = %+v, %v", res, err)
	}
	var out bytes.Buffer
	if res, err := cl.Sandboxes.ExecStream(ctx, sb.ID, platinum.ExecRequest{Cmd: []string{"sh", "-c", "for i in 1 2 3; do echo $i; done"}}, &out, io.Discard); err != nil || res.ExitCode != 0 || out.String() != "1\n2\n3\n" {
		t.Fatalf("stream = %+v %q %v", res, out.String(), err)
	}
	if err := cl.Sandboxes.Upload(ctx, sb.ID, "/root/x.txt", strings.NewReader("hello")); err != nil {
		t.Fatal(err)
	}
	rc, err := cl.Sandboxes.Download(ctx, sb.ID, "/root/x.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "hello" {
		t.Errorf("download = %q", got)
	}
	found := false
	for s, err := range cl.Sandboxes.Iterate(ctx, platinum.ListOptions{State: platinum.StateRunning, Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		found = found || s.ID == sb.ID
	}
	if !found {
		t.Error("Iterate did not find the sandbox")
	}
	if _, err := cl.Sandboxes.Get(ctx, "sbx_01KZZZZZZZZZZZZZZZZZZZZZZZ"); !platinum.IsNotFound(err) {
		t.Errorf("missing sandbox: %v", err)
	}
	page, err := cl.Sandboxes.List(ctx, platinum.ListOptions{State: platinum.StateRunning, Limit: 200})
	if err != nil || !slices.ContainsFunc(page.Rows, func(s platinum.Sandbox) bool { return s.ID == sb.ID }) {
		t.Errorf("List(running) = %+v, %v; want it to hold %s", page, err, sb.ID)
	}
	// Errors are typed and carry the API's code.
	var ae *platinum.APIError
	if _, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", RAMMB: 64}); !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Code != "invalid_request" {
		t.Errorf("create with ram_mb 64: %v, want an APIError invalid_request", err)
	}
	if _, err := cl.Sandboxes.List(ctx, platinum.ListOptions{Limit: 201}); !errors.As(err, &ae) || ae.Code != "invalid_request" {
		t.Errorf("List(limit 201): %v, want an APIError invalid_request", err)
	}
	if _, err := platinum.New(env.url, "pt_wrong").Sandboxes.Get(ctx, sb.ID); !errors.As(err, &ae) || ae.StatusCode != 401 || ae.Code != "unauthorized" {
		t.Errorf("wrong token: %v, want an APIError unauthorized", err)
	}
	if _, err := cl.Sandboxes.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Sandboxes.WaitForState(ctx, sb.ID, platinum.StateDeleted); err != nil {
		t.Errorf("wait deleted: %v", err)
	}
}
