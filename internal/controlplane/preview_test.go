package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// fakeIssuer records what the control plane asks to sign.
type fakeIssuer struct{}

func (fakeIssuer) Issue(id string, port int, gen int64, exp time.Time) PreviewURL {
	u := PreviewURL{SandboxID: id, Port: port, Token: fmt.Sprintf("%s/%d/%d", id, port, gen)}
	if !exp.IsZero() {
		u.ExpiresAt = &exp
	}
	return u
}

// previewService is newTestService with org_a on record (it may be
// there already).
func previewService(t *testing.T, h *fakeHost) (*Service, store.Store) {
	s, st := newTestService(t, h)
	st.CreateOrg(context.Background(), store.Org{ID: org.OrgID, Name: "a", CreatedAt: time.Now()})
	return s, st
}

func TestPreviewSettings(t *testing.T) {
	s, _ := previewService(t, &fakeHost{})
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox"})
	if _, err := s.PreviewURL(ctx, org, sb.ID, 3000, 0); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("without a proxy: %v, want ErrUnavailable", err)
	}
	s.cfg.Preview = fakeIssuer{}
	for _, tc := range []struct {
		port int
		exp  time.Duration
	}{{0, 0}, {65536, 0}, {AgentPort, 0}, {3000, -time.Second}, {3000, MaxPreviewExpiry + time.Second}} {
		if _, err := s.PreviewURL(ctx, org, sb.ID, tc.port, tc.exp); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("port %d expiry %v: %v, want ErrInvalidArgument", tc.port, tc.exp, err)
		}
	}
	if _, err := s.PreviewURL(ctx, Principal{OrgID: "org_other"}, sb.ID, 3000, 0); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("another org: %v, want ErrNotFound", err)
	}
	u, err := s.PreviewURL(ctx, org, sb.ID, 3000, time.Hour)
	if err != nil || u.ExpiresAt == nil || u.Public || u.Token != sb.ID+"/3000/0" {
		t.Fatalf("PreviewURL = %+v, %v", u, err)
	}
	if u, err = s.SetPreviewPublic(ctx, org, sb.ID, 3000, true); err != nil || !u.Public {
		t.Fatalf("public: %+v %v", u, err)
	}
	if err := s.RevokePreview(ctx, org, sb.ID, 3000); err != nil {
		t.Fatal(err)
	}
	got, _ := s.PreviewTarget(ctx, sb.ID)
	if got.Preview.IsPublic(3000) || got.Preview.Generation(3000) != 1 || got.Preview.Generation(3001) != 0 {
		t.Errorf("after revoke: %+v", got.Preview)
	}
	if u, _ = s.PreviewURL(ctx, org, sb.ID, 3000, 0); u.Token != sb.ID+"/3000/1" || u.ExpiresAt != nil {
		t.Errorf("token after revoke = %+v", u)
	}
	if _, err := s.PreviewTarget(ctx, "sbx_01KZZZZZZZZZZZZZZZZZZZZZZZ"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("unknown target: %v", err)
	}
}

func TestAutoResume(t *testing.T) {
	h := &fakeHost{}
	s, st := previewService(t, h)
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox"})
	stop := func() {
		t.Helper()
		s.Stop(ctx, org, sb.ID)
		if _, ok, _ := s.WaitFor(ctx, org, sb.ID, sandbox.StateStopped, 5*time.Second); !ok {
			t.Fatal("not stopped")
		}
	}
	stop()
	before, _ := st.SandboxEvents(ctx, sb.ID)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.AutoResume(ctx, sb.ID, 5*time.Second)
			if err != nil || got.State != sandbox.StateRunning {
				t.Errorf("AutoResume = %v, %v", got.State, err)
			}
		}()
	}
	wg.Wait()
	after, _ := st.SandboxEvents(ctx, sb.ID)
	starts := 0
	for _, e := range after[len(before):] {
		if e.Type == store.EventStateChanged && strings.Contains(e.Data, `"to":"starting"`) {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("10 concurrent auto-resumes made %d starts, want 1", starts)
	}

	// auto_resume off: refused, and the sandbox stays stopped.
	off := false
	if _, err := s.Update(ctx, org, sb.ID, Patch{AutoResume: &off}); err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := s.AutoResume(ctx, sb.ID, time.Second); !errors.Is(err, ErrAutoResumeDisabled) {
		t.Errorf("auto_resume off: %v, want ErrAutoResumeDisabled", err)
	}
	if got, _ := s.PreviewTarget(ctx, sb.ID); got.State != sandbox.StateStopped {
		t.Errorf("auto_resume off: state %s", got.State)
	}

	// A sandbox that cannot run is a StateError, not a wait.
	h.StartFunc = func(ctx context.Context, spec StartSpec) (Instance, error) { return Instance{}, errors.New("boom") }
	on := true
	s.Update(ctx, org, sb.ID, Patch{AutoResume: &on})
	var se *StateError
	if _, err := s.AutoResume(ctx, sb.ID, 5*time.Second); !errors.As(err, &se) || se.State != sandbox.StateFailed {
		t.Errorf("failing start: %v, want a StateError in failed", err)
	}
}
