package platinum

import (
	"context"
	"fmt"
)

// UpdateRequest changes a sandbox's mutable fields (PATCH
// /v1/sandboxes/{id}). Nil fields are left as they are.
type UpdateRequest struct {
	// Name renames the sandbox: new("ci-runner-2") sets a name, new("")
	// clears it (sent as JSON null, which is how the API clears). Names
	// are unique among the organization's live sandboxes.
	Name *string
	// AutoResume turns auto-resume on or off: whether a request to a
	// preview URL of the stopped or archived sandbox starts it. It does
	// not affect a running sandbox.
	AutoResume *bool
}

// body is the PATCH body: only the fields set, with a cleared name as null.
func (r UpdateRequest) body() map[string]any {
	b := map[string]any{}
	if r.Name != nil {
		if *r.Name == "" {
			b["name"] = nil
		} else {
			b["name"] = *r.Name
		}
	}
	if r.AutoResume != nil {
		b["auto_resume"] = *r.AutoResume
	}
	return b
}

// Update applies req to the sandbox and returns the updated record. A name
// another live sandbox of the organization has gives an APIError with code
// conflict; a malformed name one with code invalid_request (Field "name").
func (s *SandboxesService) Update(ctx context.Context, id string, req UpdateRequest) (*Sandbox, error) {
	return fetchJSON[Sandbox](ctx, s.c, "PATCH", sandboxPath(id), nil, req.body(), "update sandbox %s", id)
}

// Rename gives the sandbox a new name; an empty name clears it (as
// ClearName does). Errors are Update's.
func (s *SandboxesService) Rename(ctx context.Context, id, name string) (*Sandbox, error) {
	return s.Update(ctx, id, UpdateRequest{Name: &name})
}

// ClearName removes the sandbox's name, so it can be given to another.
func (s *SandboxesService) ClearName(ctx context.Context, id string) (*Sandbox, error) {
	return s.Update(ctx, id, UpdateRequest{Name: new("")})
}

// SetAutoResume turns auto-resume on or off. Off means only Start or
// Resume bring the sandbox back: a preview-URL request to it while it is
// stopped gets a 404 with the reason auto-resume-disabled. Use it when
// your own system decides when the sandbox runs.
func (s *SandboxesService) SetAutoResume(ctx context.Context, id string, on bool) (*Sandbox, error) {
	return s.Update(ctx, id, UpdateRequest{AutoResume: &on})
}

// EnvApplies says when an environment change reaches the sandbox.
type EnvApplies string

// When an environment change applies.
const (
	// AppliesNextExec (a running sandbox): every exec, process start and
	// run-code after the call sees the change. Processes already running,
	// and anything started from the boot environment (services started at
	// boot, terminal shells), keep the old values until the next cold boot.
	AppliesNextExec EnvApplies = "next_exec"
	// AppliesNextStart (a stopped sandbox): its next boot sees the change.
	AppliesNextStart EnvApplies = "next_start"
)

// EnvResult is the answer to an environment change: the names of all the
// sandbox's variables afterwards (values are never returned) and when the
// change applies.
type EnvResult struct {
	ID      string     `json:"id"`
	State   State      `json:"state"`
	EnvKeys []string   `json:"env_keys"`
	Applies EnvApplies `json:"applies"`
}

// SetEnv merges changes into the sandbox's environment: a non-nil value
// sets the key, a nil value removes it, and keys not in changes are left
// untouched, e.g.
//
//	SetEnv(ctx, id, map[string]*string{"API_TOKEN": new("v2"), "OLD": nil})
//
// Concurrent calls merge against the latest committed environment, so
// disjoint changes are never lost. A rejected change changes nothing:
// an APIError with code env_too_large when the merged environment would
// be over 256 KiB, env_var_too_large when one KEY=VALUE is over 128 KiB,
// invalid_request for a bad key.
func (s *SandboxesService) SetEnv(ctx context.Context, id string, changes map[string]*string) (*EnvResult, error) {
	if changes == nil {
		changes = map[string]*string{}
	}
	var out EnvResult
	in := map[string]any{"env": changes}
	if _, err := s.c.doJSON(ctx, "PATCH", sandboxPath(id)+"/env", nil, in, &out); err != nil {
		return nil, fmt.Errorf("set env of sandbox %s: %w", id, err)
	}
	if out.EnvKeys == nil {
		out.EnvKeys = []string{}
	}
	return &out, nil
}

// UpdateEnv is SetEnv for callers that hold plain values: it sets every
// pair of set and removes every key in unset. Naming a key in both is an
// error, since the result would depend on the order.
func (s *SandboxesService) UpdateEnv(ctx context.Context, id string, set map[string]string, unset ...string) (*EnvResult, error) {
	changes := make(map[string]*string, len(set)+len(unset))
	for k, v := range set {
		changes[k] = &v
	}
	for _, k := range unset {
		if _, ok := set[k]; ok {
			return nil, fmt.Errorf("set env of sandbox %s: %s is both set and unset", id, k)
		}
		changes[k] = nil
	}
	return s.SetEnv(ctx, id, changes)
}

// Children returns the sandboxes created with this one as their parent,
// in any state but deleted, newest first. An unknown parent gives an
// APIError with code not_found.
func (s *SandboxesService) Children(ctx context.Context, id string) ([]Sandbox, error) {
	var out SandboxList
	if _, err := s.c.doJSON(ctx, "GET", sandboxPath(id)+"/children", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("children of sandbox %s: %w", id, err)
	}
	if out.Rows == nil {
		out.Rows = []Sandbox{}
	}
	return out.Rows, nil
}
