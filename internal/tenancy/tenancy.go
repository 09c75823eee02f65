// Package tenancy is who may do what, and how much: organizations, their
// projects and API tokens, the principal a token resolves to, and the org
// quotas that bound what an org's active sandboxes use at once. It sits
// below the control plane's core, which asks it to resolve a create's
// project, to issue a sandbox's own token and to check quota; transports
// call it to authenticate a request and to manage orgs, projects, tokens
// and quotas (docs/access.md).
package tenancy

import (
	"log/slog"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/syncs"
)

// Config holds the default org quotas; an org's overrides
// (PUT /v1/orgs/{id}/quotas) win. 0 disables a limit.
type Config struct {
	// OrgMaxSandboxes, OrgMaxCPU and OrgMaxRAMMB bound what one org's
	// active sandboxes (creating, restoring, starting, running, stopping)
	// use at once.
	OrgMaxSandboxes int
	OrgMaxCPU       float64
	OrgMaxRAMMB     int
}

// DefaultConfig returns the production defaults: 100 sandboxes, 256 vCPUs
// and 512 GiB per org.
func DefaultConfig() Config {
	return Config{OrgMaxSandboxes: 100, OrgMaxCPU: 256, OrgMaxRAMMB: 512 * 1024}
}

// Service is the tenancy part of the control plane. Create it with New.
type Service struct {
	cfg   Config
	store store.Store
	log   *slog.Logger
	// quota serialises an org's quota checks and the writes that follow
	// them (on this API node).
	quota syncs.KeyedMutex
}

// New returns the service over st.
func New(cfg Config, st store.Store, logger *slog.Logger) *Service {
	return &Service{cfg: cfg, store: st, log: logger}
}
