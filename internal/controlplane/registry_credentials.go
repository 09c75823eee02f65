package controlplane

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// RegistryCredential is an org's stored credentials for one registry, as
// the API shows them: never the secret.
type RegistryCredential struct {
	Registry  string
	Username  string
	Kind      string // basic or token
	CreatedAt time.Time
	UpdatedAt time.Time
}

var registryRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$`)

// canonicalRegistry names a registry the way references resolve to it
// (Docker Hub is index.docker.io).
func canonicalRegistry(r string) (string, error) {
	r = strings.ToLower(strings.TrimSpace(r))
	if !registryRE.MatchString(r) {
		return "", &sandbox.FieldError{Field: "registry", Reason: "must be a registry host, optionally with :port (e.g. ghcr.io)"}
	}
	reg, err := name.NewRegistry(r)
	if err != nil {
		return "", &sandbox.FieldError{Field: "registry", Reason: err.Error()}
	}
	return reg.RegistryStr(), nil
}

func credentialAAD(org, registry string) string { return "registry/" + org + "/" + registry }

// PutRegistryCredential stores (or replaces) the org's credentials for a
// registry: a username and password, or a token. The secret is sealed at
// rest and never returned or logged.
func (s *Service) PutRegistryCredential(ctx context.Context, p Principal, registry, username, password, token string) (RegistryCredential, error) {
	if p.SandboxID != "" {
		return RegistryCredential{}, fmt.Errorf("a sandbox's token cannot manage registry credentials: %w", sandbox.ErrForbidden)
	}
	reg, err := canonicalRegistry(registry)
	if err != nil {
		return RegistryCredential{}, err
	}
	c := store.RegistryCredential{OrgID: p.OrgID, Registry: reg}
	switch {
	case token != "" && username == "" && password == "":
		c.Kind = "token"
	case token == "" && username != "" && password != "":
		c.Kind, c.Username = "basic", username
	default:
		return RegistryCredential{}, &sandbox.FieldError{Field: "password", Reason: "give a username and a password, or a token"}
	}
	if s.cfg.Sealer == nil {
		return RegistryCredential{}, fmt.Errorf("storing credentials needs a secrets key: %w", sandbox.ErrUnavailable)
	}
	secret := password
	if c.Kind == "token" {
		secret = token
	}
	c.Sealed = []byte(s.cfg.Sealer.Seal(secret, credentialAAD(p.OrgID, reg)))
	if err := s.store.PutRegistryCredential(ctx, c); err != nil {
		return RegistryCredential{}, err
	}
	got, err := s.store.GetRegistryCredential(ctx, p.OrgID, reg)
	if err != nil {
		return RegistryCredential{}, err
	}
	s.log.InfoContext(ctx, "registry credentials stored", "org", p.OrgID, "registry", reg, "kind", c.Kind)
	return viewCredential(got), nil
}

func viewCredential(c store.RegistryCredential) RegistryCredential {
	return RegistryCredential{Registry: c.Registry, Username: c.Username, Kind: c.Kind, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

// ListRegistryCredentials lists the org's registries with credentials.
func (s *Service) ListRegistryCredentials(ctx context.Context, p Principal) ([]RegistryCredential, error) {
	if p.SandboxID != "" {
		return nil, fmt.Errorf("a sandbox's token cannot manage registry credentials: %w", sandbox.ErrForbidden)
	}
	cs, err := s.store.ListRegistryCredentials(ctx, p.OrgID)
	if err != nil {
		return nil, err
	}
	out := make([]RegistryCredential, 0, len(cs))
	for _, c := range cs {
		out = append(out, viewCredential(c))
	}
	return out, nil
}

// DeleteRegistryCredential forgets the org's credentials for a registry.
func (s *Service) DeleteRegistryCredential(ctx context.Context, p Principal, registry string) error {
	if p.SandboxID != "" {
		return fmt.Errorf("a sandbox's token cannot manage registry credentials: %w", sandbox.ErrForbidden)
	}
	reg, err := canonicalRegistry(registry)
	if err != nil {
		return err
	}
	return s.store.DeleteRegistryCredential(ctx, p.OrgID, reg)
}

// registryAuth returns the org's credentials for the registry of ref
// (anonymous when it stored none).
func (s *Service) registryAuth(ctx context.Context, org, ref string) (hostapi.RegistryAuth, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return hostapi.RegistryAuth{}, &TemplateError{Code: "image_invalid", Field: "from_image",
			Err: fmt.Errorf("image reference %q: %v: %w", ref, err, sandbox.ErrInvalidArgument)}
	}
	c, err := s.store.GetRegistryCredential(ctx, org, r.Context().RegistryStr())
	if store.IsNotFound(err) {
		return hostapi.RegistryAuth{}, nil
	}
	if err != nil {
		return hostapi.RegistryAuth{}, err
	}
	if s.cfg.Sealer == nil {
		return hostapi.RegistryAuth{}, fmt.Errorf("registry credentials need the secrets key: %w", sandbox.ErrUnavailable)
	}
	secret, err := s.cfg.Sealer.Open(string(c.Sealed), credentialAAD(org, c.Registry))
	if err != nil {
		return hostapi.RegistryAuth{}, fmt.Errorf("registry credentials for %s: %w", c.Registry, err)
	}
	if c.Kind == "token" {
		return hostapi.RegistryAuth{Token: secret}, nil
	}
	return hostapi.RegistryAuth{Username: c.Username, Password: secret}, nil
}
