package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

func TestSessionProvisioningFailureEndsFailedWithReason(t *testing.T) {
	h := &fakeHost{StartFunc: func(ctx context.Context, spec StartSpec) (Instance, error) {
		return Instance{}, errors.New("no room on this host")
	}}
	s, _, st := newTestService(t, h)
	ctx := context.Background()
	mustOrgs(t, s)
	ses, created, err := s.Create(ctx, org, Request{VaultID: "v1", WorkflowID: "wf-1", Template: "busybox"})
	if err != nil || !created || ses.Status != store.SessionProvisioning || ses.Warm {
		t.Fatalf("CreateSession = %+v %v %v; want a cold provisioning session", ses, created, err)
	}
	got, err := s.Wait(ctx, org, ses.ID, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.SessionFailed || !strings.Contains(got.Reason, "no room on this host") || got.EndedAt == nil {
		t.Fatalf("after a failed start: %+v; want failed with the host's reason", got)
	}
	if _, err := s.SandboxID(ctx, org, ses.ID); !errors.As(err, new(*NotReadyError)) {
		t.Errorf("SessionSandbox of a failed session = %v; want NotReadyError", err)
	}

	// Every status change is an event carrying the session's context.
	evs, err := st.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, e := range evs {
		if e.Type != EventType {
			continue
		}
		var d Event
		if err := json.Unmarshal([]byte(e.Data), &d); err != nil {
			t.Fatal(err)
		}
		if d.SessionID != ses.ID || d.VaultID != "v1" || d.WorkflowID != "wf-1" || e.OrgID != org.OrgID {
			t.Errorf("event %+v of %s", d, e.OrgID)
		}
		statuses = append(statuses, d.Status)
	}
	if diff := cmp.Diff([]string{"provisioning", "failed"}, statuses); diff != "" {
		t.Errorf("session events (-want +got):\n%s", diff)
	}

	// The context is free again: a new create starts a new session.
	again, created, err := s.Create(ctx, org, Request{VaultID: "v1", WorkflowID: "wf-1", Template: "busybox"})
	if err != nil || !created || again.ID == ses.ID {
		t.Fatalf("create after failure = %+v %v %v; want a new session", again, created, err)
	}
}

func TestRequestValidation(t *testing.T) {
	s, _, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	sesID := sandbox.NewID(sandbox.PrefixSession)
	tests := []struct {
		name      string
		req       Request
		field     string
		notFound  bool
		wantInMsg string
	}{
		{"no vault", Request{WorkflowID: "w"}, "vault_id", false, "required"},
		{"no context", Request{VaultID: "v"}, "workflow_id", false, "exactly one"},
		{"both contexts", Request{VaultID: "v", WorkflowID: "w", AgentSessionID: "a"}, "workflow_id", false, "exactly one"},
		{"bad characters", Request{VaultID: "v", WorkflowID: "w w"}, "workflow_id", false, "letters"},
		{"session id as workflow", Request{VaultID: "v", WorkflowID: sesID}, "workflow_id", true, "is a session_id"},
		{"sandbox id as agent session", Request{VaultID: "v", AgentSessionID: sandbox.NewID(sandbox.PrefixSandbox)}, "agent_session_id", true, "is a sandbox_id"},
		{"unknown template", Request{VaultID: "v", WorkflowID: "w", Template: "nope"}, "template", true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Create(ctx, org, tc.req)
			var fe *sandbox.FieldError
			var ik *controlplane.IDKindError
			var nf interface{ Field() string }
			switch {
			case tc.notFound && errors.As(err, &ik):
				if ik.Field != tc.field || !strings.Contains(err.Error(), tc.wantInMsg) {
					t.Errorf("err = %v (field %s); want %s and %q", err, ik.Field, tc.field, tc.wantInMsg)
				}
			case tc.notFound && errors.As(err, &nf):
				if nf.Field() != tc.field {
					t.Errorf("err = %v on %s; want %s", err, nf.Field(), tc.field)
				}
			case !tc.notFound && errors.As(err, &fe):
				if fe.Field != tc.field || !strings.Contains(fe.Reason, tc.wantInMsg) {
					t.Errorf("err = %v; want field %s with %q", err, tc.field, tc.wantInMsg)
				}
			default:
				t.Fatalf("err = %v; want a %s error", err, tc.field)
			}
			if tc.notFound && !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("err = %v; want a not-found error", err)
			}
		})
	}
	if all, _ := st.ListSessions(ctx, org.OrgID, true); len(all) != 0 {
		t.Errorf("refused requests left %d sessions", len(all))
	}
}

func TestSessionStatusNeverStartsAnything(t *testing.T) {
	s, _, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	_, ok, err := s.Status(ctx, org, StatusRequest{VaultID: "v", AgentSessionID: "chat-1"})
	if err != nil || ok {
		t.Fatalf("SessionStatus = %v %v; want no session", ok, err)
	}
	if sbs, total, _ := st.ListSandboxes(ctx, store.ListOptions{}); total != 0 {
		t.Errorf("status lookup created sandboxes: %v", sbs)
	}
	if all, _ := st.ListSessions(ctx, org.OrgID, true); len(all) != 0 {
		t.Errorf("status lookup created sessions: %v", all)
	}
}

func TestGetSessionSaysWhichIDKindItExpects(t *testing.T) {
	h := &fakeHost{StartFunc: func(ctx context.Context, spec StartSpec) (Instance, error) {
		return Instance{}, errors.New("no")
	}}
	s, cp, _ := newTestService(t, h)
	ctx := context.Background()
	mustOrgs(t, s)
	ses, _, err := s.Create(ctx, org, Request{VaultID: "v", WorkflowID: "wf-9", Template: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(ctx, org, "wf-9")
	var ik *controlplane.IDKindError
	if !errors.As(err, &ik) || ik.Got != "workflow_id" || !strings.Contains(err.Error(), ses.ID) {
		t.Fatalf("GetSession(workflow id) = %v; want an IDKindError naming the workflow and its session", err)
	}
	// Another org learns nothing about the workflow.
	_, err = s.Get(ctx, Principal{OrgID: "org_b", Role: store.RoleAdmin}, "wf-9")
	if !errors.As(err, &ik) || ik.Got != "" {
		t.Fatalf("GetSession from another org = %v; want a plain not-found", err)
	}
	if _, err := cp.Get(ctx, org, ses.ID, false); !errors.As(err, &ik) || ik.Got != "session_id" {
		t.Fatalf("Get(sandbox) with a session id = %v; want an IDKindError", err)
	}
}

// mustOrgs creates the test orgs and the pool org.
func mustOrgs(t *testing.T, s *Service) {
	t.Helper()
	for _, id := range []string{org.OrgID, "org_b"} {
		if err := s.store.CreateOrg(context.Background(), store.Org{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ensurePoolOrg(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// readyPoolMember stores a running, ready member of template's pool.
func readyPoolMember(t *testing.T, st store.Store, template string) sandbox.Sandbox {
	t.Helper()
	sb := sandbox.Sandbox{
		ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: PoolOrgID, State: sandbox.StateRunning, Template: template,
		CPU: sandbox.DefaultCPU, RAMMB: sandbox.DefaultRAM, DiskGB: sandbox.DefaultDisk,
		Metadata: map[string]string{store.MetaPool: template, store.MetaPoolReady: "1"},
	}
	if err := st.CreateSandbox(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	return sb
}

func TestWarmClaimCountsAgainstOrgQuota(t *testing.T) {
	s, _, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	mustOrgs(t, s)
	pooled := readyPoolMember(t, st, "busybox")
	mine := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: org.OrgID, State: sandbox.StateRunning,
		Template: "busybox", CPU: 1, RAMMB: 512, DiskGB: 1}
	if err := st.CreateSandbox(ctx, mine); err != nil {
		t.Fatal(err)
	}
	setOrgDefaults(s, st, func(c *tenancy.Config) { c.OrgMaxSandboxes = 1 })
	_, _, err := s.Create(ctx, org, Request{VaultID: "v", WorkflowID: "w", Template: "busybox"})
	var qe *sandbox.QuotaError
	if !errors.As(err, &qe) {
		t.Fatalf("claim over the org's sandbox quota = %v; want a sandbox.QuotaError", err)
	}
	if back, _ := st.GetSandbox(ctx, "", pooled.ID); back.OrgID != PoolOrgID {
		t.Fatalf("refused claim moved the pooled sandbox to %s", back.OrgID)
	}

	setOrgDefaults(s, st, func(c *tenancy.Config) { c.OrgMaxSandboxes = 2 })
	ses, created, err := s.Create(ctx, org, Request{VaultID: "v", WorkflowID: "w", Template: "busybox"})
	if err != nil || !created || !ses.Warm || ses.Status != store.SessionReady || ses.SandboxID != pooled.ID {
		t.Fatalf("warm claim = %+v %v %v; want the pooled sandbox, ready", ses, created, err)
	}
	sb, err := st.GetSandbox(ctx, org.OrgID, pooled.ID)
	prj, perr := st.DefaultProject(ctx, org.OrgID)
	if err != nil || perr != nil || sb.ProjectID != prj.ID {
		t.Fatalf("claimed sandbox = %+v (%v); want it in %s's default project %v (%v)", sb, err, org.OrgID, prj.ID, perr)
	}
}

// TestPlatformMetadataSurvivesPatch: a metadata patch (Daytona's labels)
// may not set the platform's keys, and replacing a session sandbox's
// metadata keeps its pt_session_id, so the session still finds it.
func TestPlatformMetadataSurvivesPatch(t *testing.T) {
	// The sandbox is stored, not provisioned: a provisioning session would
	// fail (no agent answers behind the fake host) and delete it mid-test.
	s, cp, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	mustOrgs(t, s)
	ses := Session{ID: sandbox.NewID(sandbox.PrefixSession), SandboxID: sandbox.NewID(sandbox.PrefixSandbox)}
	if err := st.CreateSandbox(ctx, sandbox.Sandbox{ID: ses.SandboxID, OrgID: org.OrgID, State: sandbox.StateRunning,
		Template: "busybox", CPU: 1, RAMMB: 512, DiskGB: 1, Metadata: map[string]string{store.MetaSessionID: ses.ID}}); err != nil {
		t.Fatal(err)
	}
	forged := map[string]string{store.MetaPoolReady: "1"}
	if _, err := cp.Update(ctx, org, ses.SandboxID, Patch{Metadata: &forged}); !errors.As(err, new(*sandbox.FieldError)) {
		t.Fatalf("patch setting %s = %v; want a metadata FieldError", store.MetaPoolReady, err)
	}
	md := map[string]string{"team": "a"}
	sb, err := cp.Update(ctx, org, ses.SandboxID, Patch{Metadata: &md})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"team": "a", store.MetaSessionID: ses.ID}
	if diff := cmp.Diff(want, sb.Metadata); diff != "" {
		t.Errorf("metadata after patch (-want +got):\n%s", diff)
	}
}
