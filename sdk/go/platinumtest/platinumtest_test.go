package platinumtest_test

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

// TestServerRunsSandboxes: the server is ptd, so a sandbox goes through
// its real lifecycle, commands run in it with its environment, and files
// written through the API are what its commands read.
func TestServerRunsSandboxes(t *testing.T) {
	srv := platinumtest.NewServer(t)
	c := platinum.New(srv.URL, platinumtest.Token, platinum.WithPollInterval(10*time.Millisecond))
	ctx := t.Context()

	sb, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Env: map[string]string{"GREETING": "hello"}},
		platinum.WaitForRunning(30*time.Second))
	if err != nil || sb.State != platinum.StateRunning {
		t.Fatalf("create: %+v, %v", sb, err)
	}
	res, err := c.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: `printf '%s world' "$GREETING"`})
	if err != nil || res.ExitCode != 0 || res.Stdout != "hello world" {
		t.Fatalf("exec: %+v, %v", res, err)
	}

	file := filepath.Join(t.TempDir(), "note.txt")
	if err := c.Sandboxes.Upload(ctx, sb.ID, file, strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	res, err = c.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Cmd: []string{"cat", file}})
	if err != nil || res.Stdout != "kept" {
		t.Fatalf("cat of an uploaded file: %+v, %v", res, err)
	}
	rc, err := c.Sandboxes.Download(ctx, sb.ID, file)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "kept" {
		t.Fatalf("download = %q", b)
	}

	if sb, err = c.Sandboxes.Stop(ctx, sb.ID, platinum.WaitForStopped(30*time.Second)); err != nil || sb.State != platinum.StateStopped {
		t.Fatalf("stop: %+v, %v", sb, err)
	}
	if _, err := c.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Cmd: []string{"true"}}); err == nil {
		t.Fatal("exec in a stopped sandbox succeeded")
	}
	if sb, err = c.Sandboxes.Start(ctx, sb.ID, platinum.WaitForRunning(30*time.Second)); err != nil || sb.State != platinum.StateRunning {
		t.Fatalf("start: %+v, %v", sb, err)
	}
	res, err = c.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Cmd: []string{"printenv", "GREETING"}})
	if err != nil || res.Stdout != "hello\n" {
		t.Fatalf("env after a start: %+v, %v", res, err)
	}
	if _, err := c.Sandboxes.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes.WaitForState(ctx, sb.ID, platinum.StateDeleted); err != nil {
		t.Fatal(err)
	}
	if got := srv.Host.Destroyed(); len(got) != 1 || got[0] != sb.ID {
		t.Errorf("host destroyed %q, want [%s]", got, sb.ID)
	}
}
