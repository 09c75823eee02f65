package tenancy

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
)

// openTenancy opens the SQLite store at path and a Service over it.
func openTenancy(t *testing.T, path string) (*Service, store.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return New(DefaultConfig(), st, slog.New(slog.DiscardHandler)), st
}

// TestBootstrapConcurrent: ptd processes sharing one store start together
// with the same PT_TOKEN: each start succeeds and the token is installed
// once.
func TestBootstrapConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	a, st := openTenancy(t, path)
	b, _ := openTenancy(t, path)
	var wg sync.WaitGroup
	var installed atomic.Int32
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			ok, err := s.Bootstrap(t.Context(), "tok-shared")
			if err != nil {
				t.Errorf("Bootstrap: %v", err)
			}
			if ok {
				installed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := installed.Load(); n != 1 {
		t.Errorf("token installed %d times, want 1", n)
	}
	if _, err := st.TokenByHash(t.Context(), HashToken("tok-shared")); err != nil {
		t.Errorf("token not installed: %v", err)
	}
}

// TestTokens: a bootstrapped admin token authenticates as the default
// org's platform admin; tokens it issues carry their role and project;
// unknown tokens are unauthenticated and the wrong kind of token is
// forbidden.
func TestTokens(t *testing.T) {
	s, _ := openTenancy(t, filepath.Join(t.TempDir(), "db"))
	ctx := context.Background()
	if _, err := s.Bootstrap(ctx, "tok-admin"); err != nil {
		t.Fatal(err)
	}
	admin, err := s.Authenticate(ctx, "tok-admin")
	if err != nil || !admin.PlatformAdmin() {
		t.Fatalf("Authenticate(admin) = %+v, %v; want the platform admin", admin, err)
	}
	for _, tok := range []string{"", "tok-unknown"} {
		if _, err := s.Authenticate(ctx, tok); !errors.Is(err, sandbox.ErrUnauthenticated) {
			t.Errorf("Authenticate(%q) = %v; want ErrUnauthenticated", tok, err)
		}
	}
	prj, err := s.CreateProject(ctx, admin, "ml")
	if err != nil {
		t.Fatal(err)
	}
	rec, secret, err := s.CreateToken(ctx, admin, TokenRequest{ProjectID: prj.ID})
	if err != nil || rec.Role != store.RoleMember || rec.ProjectID != prj.ID {
		t.Fatalf("CreateToken(project) = %+v, %v", rec, err)
	}
	member, err := s.Authenticate(ctx, secret)
	if err != nil || member.ProjectID != prj.ID || member.PlatformAdmin() {
		t.Fatalf("Authenticate(project token) = %+v, %v", member, err)
	}
	if _, _, err := s.CreateToken(ctx, member, TokenRequest{}); !errors.Is(err, sandbox.ErrForbidden) {
		t.Errorf("a project token creating a token = %v; want ErrForbidden", err)
	}
	if _, err := s.CreateProject(ctx, member, "other"); !errors.Is(err, sandbox.ErrForbidden) {
		t.Errorf("a project token creating a project = %v; want ErrForbidden", err)
	}
	if _, _, err := s.CreateToken(ctx, admin, TokenRequest{Role: store.RoleAdmin, ProjectID: prj.ID}); err == nil {
		t.Error("an admin token scoped to a project was issued")
	}
}
