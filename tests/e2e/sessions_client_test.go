package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestSessionSDKAndCLI drives sessions and pools through the Go SDK and
// the pt CLI, including a warm session that restores its context's
// workspace.
func TestSessionSDKAndCLI(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, sessionTemplate)
	drainPool(t, c)
	ctx := context.Background()
	cl := platinum.New(env.url, env.token)
	sc := platinum.SessionContext{VaultID: "vault-" + randHex(4), AgentSessionID: "chat-" + randHex(4)}

	// SDK: status before, a cold create, a refused exec, a bounded wait.
	st, err := cl.Sessions.Status(ctx, sc)
	if err != nil || st.Status != platinum.SessionNone || st.SessionID != "" {
		t.Fatalf("Status before = %+v, %v; want none", st, err)
	}
	ses, err := cl.Sessions.Create(ctx, platinum.SessionCreateRequest{SessionContext: sc, Template: sessionTemplate})
	if err != nil || ses.Status != platinum.SessionProvisioning {
		t.Fatalf("Create = %+v, %v; want provisioning", ses, err)
	}
	t.Cleanup(func() { cl.Sessions.Stop(context.Background(), ses.SessionID, time.Minute) })
	if _, err := cl.Sessions.Exec(ctx, ses.SessionID, platinum.ExecRequest{Shell: "true"}); !platinum.IsCode(err, "not_ready") {
		t.Fatalf("Exec before ready = %v; want not_ready", err)
	}
	if ses, err = cl.Sessions.Wait(ctx, ses.SessionID, 4*time.Minute); err != nil || !ses.Ready() {
		t.Fatalf("Wait = %+v, %v", ses, err)
	}
	if err := cl.Sessions.Upload(ctx, ses.SessionID, "/workspace/from-sdk.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Sessions.Get(ctx, sc.AgentSessionID); !platinum.IsNotFound(err) {
		t.Fatalf("Get(agent session id) = %v; want not_found", err)
	}
	if ses, err = cl.Sessions.Stop(ctx, ses.SessionID, 2*time.Minute); err != nil || ses.Status != platinum.SessionStopped {
		t.Fatalf("Stop = %+v, %v", ses, err)
	}
	if _, err := cl.Sessions.Wait(ctx, ses.SessionID, time.Second); !errors.Is(err, platinum.ErrSessionNotReady) {
		t.Fatalf("Wait on a stopped session = %v; want ErrSessionNotReady", err)
	}

	// CLI: pool set/list, then a warm session that sees the workspace.
	if out, errOut, code := pt(t, nil, "pool", "set", sessionTemplate, "--min-ready", "1", "--max", "1"); code != 0 {
		t.Fatalf("pt pool set: %d %s %s", code, out, errOut)
	}
	t.Cleanup(func() { c.do("PUT", "/v1/pools/"+sessionTemplate, map[string]any{"min_ready": 0, "max": 0}) })
	waitPoolReady(t, c, 1)
	if out, _, code := pt(t, nil, "pool", "list"); code != 0 || !strings.Contains(out, sessionTemplate) {
		t.Fatalf("pt pool list: %d %s", code, out)
	}
	out, errOut, code := pt(t, nil, "session", "create", "--vault", sc.VaultID, "--agent-session", sc.AgentSessionID,
		"--template", sessionTemplate, "--wait", "2m", "--json")
	if code != 0 {
		t.Fatalf("pt session create: %d %s %s", code, out, errOut)
	}
	var got platinum.Session
	if err := json.Unmarshal([]byte(out), &got); err != nil || !got.Ready() || !got.Warm {
		t.Fatalf("pt session create: %s (%v); want a ready warm session", out, err)
	}
	t.Cleanup(func() { cl.Sessions.Stop(context.Background(), got.SessionID, time.Minute) })
	res, err := cl.Sessions.Exec(ctx, got.SessionID, platinum.ExecRequest{Shell: "cat /workspace/from-sdk.txt"})
	if err != nil || res.Stdout != "kept" {
		t.Fatalf("warm session workspace: %+v, %v; want the file saved by the previous session", res, err)
	}
	if out, _, code := pt(t, nil, "session", "status", "--vault", sc.VaultID, "--agent-session", sc.AgentSessionID); code != 0 || !strings.Contains(out, got.SessionID) || !strings.Contains(out, "ready") {
		t.Fatalf("pt session status: %d %s", code, out)
	}
	if out, _, code := pt(t, nil, "session", "exec", got.SessionID, "--", "sh", "-c", "cat /workspace/from-sdk.txt; exit 3"); code != 3 || out != "kept" {
		t.Fatalf("pt session exec: exit %d, %q; want exit 3 and the file", code, out)
	}
	if _, errOut, code := pt(t, nil, "session", "exec", sc.AgentSessionID, "--", "true"); code == 0 || !strings.Contains(errOut, "session_id") {
		t.Fatalf("pt session exec with the context's ID: exit %d, %q; want a not-found naming session_id", code, errOut)
	}
	if out, _, code := pt(t, nil, "session", "list"); code != 0 || !strings.Contains(out, got.SessionID) {
		t.Fatalf("pt session list: %d %s", code, out)
	}
	if out, _, code := pt(t, nil, "session", "rm", got.SessionID); code != 0 || !strings.Contains(out, "stopped") {
		t.Fatalf("pt session rm: %d %s", code, out)
	}
}
