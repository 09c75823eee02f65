package sessions

import (
	"context"
	"strings"
	"testing"
	"time"

	objfs "github.com/platinum-dev/platinum/internal/objstore/fs"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// TestStopSessionSaysWhenTheWorkspaceWasNotSaved: a stop resumed after a
// crash whose sandbox no longer runs ends stopped with a reason saying the
// workspace was not saved, unless the interrupted stop had saved it
// already (the workspace object is newer than the stop).
func TestStopSessionSaysWhenTheWorkspaceWasNotSaved(t *testing.T) {
	s, cp, st := newTestService(t, &fakeHost{})
	objs, err := objfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.Objects = objs
	ctx := context.Background()
	mustOrgs(t, s)
	if err := objs.EnsureBucket(ctx, s.cfg.WorkspaceBucket); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		saved bool
		want  string
	}{
		{"never saved", false, "workspace not saved: the sandbox is failed"},
		{"saved before the crash", true, "user_stopped"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := cp.Create(ctx, org, CreateRequest{Template: "busybox"})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, err := cp.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second); err != nil || !ok {
				t.Fatalf("sandbox not running: %v", err)
			}
			cur, err := st.GetSandbox(ctx, "", sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			cur.State, cur.Reason = sandbox.StateFailed, "lost with the host"
			if _, err := st.UpdateSandbox(ctx, cur); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC().Truncate(time.Microsecond)
			ses := Session{ID: sandbox.NewID(sandbox.PrefixSession), OrgID: org.OrgID, VaultID: "v",
				WorkflowID: "wf-" + strings.ReplaceAll(tc.name, " ", "-"), Template: "busybox", Status: store.SessionReady,
				SandboxID: sb.ID, ReadyAt: &now, CreatedAt: now, UpdatedAt: now}
			if err := st.CreateSession(ctx, ses); err != nil {
				t.Fatal(err)
			}
			ses.Version = 1
			if ses, err = s.setSession(ctx, ses, store.SessionStopping, "user_stopped", nil); err != nil {
				t.Fatal(err)
			}
			if tc.saved {
				if err := objs.Put(ctx, s.cfg.WorkspaceBucket, workspaceKey(ses), strings.NewReader("tar"), 3); err != nil {
					t.Fatal(err)
				}
			}
			s.stopSession(ctx, ses.ID)
			got, err := st.GetSession(ctx, "", ses.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != store.SessionStopped || got.Reason != tc.want {
				t.Errorf("stop resumed without a running sandbox: %s %q, want stopped %q", got.Status, got.Reason, tc.want)
			}
		})
	}
}
