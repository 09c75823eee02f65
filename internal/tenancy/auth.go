package tenancy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// DefaultOrgID is the org that owns the first admin token.
const DefaultOrgID = "org_default"

// Principal is the authenticated caller of a request.
type Principal struct {
	OrgID   string
	Role    store.Role
	TokenID string
	// SandboxID scopes a sandbox's own token: it sees and manages only
	// that sandbox's children; everything else is not found.
	SandboxID string
	// ProjectID scopes a project token: it sees and creates sandboxes only
	// in that project; everything else is not found.
	ProjectID string
}

// NewToken returns a fresh random API token ("pt_" + 40 hex chars).
func NewToken() string {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return "pt_" + hex.EncodeToString(b)
}

func HashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	var out [2 * sha256.Size]byte // every request hashes its token: one allocation, the string
	hex.Encode(out[:], h[:])
	return string(out[:])
}

// Bootstrap makes sure the default org exists and, if it has no admin token
// yet, installs token as its admin token. It reports whether token was
// installed, so the caller prints a generated token only once.
func (s *Service) Bootstrap(ctx context.Context, token string) (installed bool, err error) {
	if _, err := s.store.GetOrg(ctx, DefaultOrgID); store.IsNotFound(err) {
		if err := s.store.CreateOrg(ctx, store.Org{ID: DefaultOrgID, Name: "default", CreatedAt: time.Now().UTC()}); err != nil && !errors.Is(err, store.ErrConflict) {
			return false, fmt.Errorf("bootstrap org: %w", err)
		}
	} else if err != nil {
		return false, fmt.Errorf("bootstrap org: %w", err)
	}
	if err := s.ensureDefaultProjects(ctx); err != nil {
		return false, err
	}
	if _, err := s.store.TokenByHash(ctx, HashToken(token)); err == nil {
		return false, nil
	}
	err = s.store.CreateToken(ctx, store.Token{
		ID: sandbox.NewID(sandbox.PrefixToken), OrgID: DefaultOrgID, Role: store.RoleAdmin,
		Hash: HashToken(token), CreatedAt: time.Now().UTC(),
	})
	if errors.Is(err, store.ErrConflict) {
		// Another ptd on the same store installed it meanwhile.
		if _, gerr := s.store.TokenByHash(ctx, HashToken(token)); gerr == nil {
			return false, nil
		}
	}
	if err != nil {
		return false, fmt.Errorf("bootstrap token: %w", err)
	}
	return true, nil
}

// Authenticate resolves a bearer token to its principal.
func (s *Service) Authenticate(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, fmt.Errorf("missing bearer token: %w", sandbox.ErrUnauthenticated)
	}
	t, err := s.store.TokenByHash(ctx, HashToken(token))
	if store.IsNotFound(err) {
		return Principal{}, fmt.Errorf("unknown token: %w", sandbox.ErrUnauthenticated)
	}
	if err != nil {
		return Principal{}, err
	}
	return Principal{OrgID: t.OrgID, Role: t.Role, TokenID: t.ID, SandboxID: t.SandboxID, ProjectID: t.ProjectID}, nil
}

// CreateOrg makes a new org with a member-admin token of its own. Only
// platform admins (tokens of the default org with the admin role) may.
func (s *Service) CreateOrg(ctx context.Context, p Principal, name string) (store.Org, string, error) {
	if p.Role != store.RoleAdmin || p.OrgID != DefaultOrgID {
		return store.Org{}, "", fmt.Errorf("creating orgs needs a platform admin token: %w", sandbox.ErrForbidden)
	}
	if name == "" || len(name) > 128 {
		return store.Org{}, "", &sandbox.FieldError{Field: "name", Reason: "must be 1 to 128 characters"}
	}
	o := store.Org{ID: sandbox.NewID(sandbox.PrefixOrg), Name: name, CreatedAt: time.Now().UTC()}
	if err := s.store.CreateOrg(ctx, o); err != nil {
		return store.Org{}, "", err
	}
	if _, err := s.DefaultProject(ctx, o.ID); err != nil {
		return store.Org{}, "", err
	}
	tok := NewToken()
	err := s.store.CreateToken(ctx, store.Token{
		ID: sandbox.NewID(sandbox.PrefixToken), OrgID: o.ID, Role: store.RoleAdmin,
		Hash: HashToken(tok), CreatedAt: time.Now().UTC(),
	})
	if err != nil {
		return store.Org{}, "", err
	}
	return o, tok, nil
}

// IssueSandboxToken creates the token a sandbox's processes use to manage
// their own children (role sandbox, scoped to the sandbox and its
// project) and returns its secret, for the caller to seal.
func (s *Service) IssueSandboxToken(ctx context.Context, orgID, projectID, sandboxID string) (string, error) {
	tok := "pt_sbx_" + NewToken()[3:]
	err := s.store.CreateToken(ctx, store.Token{
		ID: sandbox.NewID(sandbox.PrefixToken), OrgID: orgID, Role: store.RoleSandbox,
		Hash: HashToken(tok), CreatedAt: time.Now().UTC(), SandboxID: sandboxID, ProjectID: projectID,
	})
	if err != nil {
		return "", fmt.Errorf("sandbox token: %w", err)
	}
	return tok, nil
}

// PlatformAdmin reports whether p is a platform admin: an admin token of
// the default org, scoped to no sandbox and no project, the platform's
// operator, who may manage every org.
func (p Principal) PlatformAdmin() bool {
	return p.Role == store.RoleAdmin && p.OrgID == DefaultOrgID && p.SandboxID == "" && p.ProjectID == ""
}

// RequireOrgToken refuses sandbox-scoped tokens: webhooks, the event feed
// and artifacts belong to the org, not to one sandbox.
func RequireOrgToken(p Principal, what string) error {
	if p.SandboxID != "" {
		return fmt.Errorf("a sandbox's token cannot manage %s: %w", what, sandbox.ErrForbidden)
	}
	return nil
}
