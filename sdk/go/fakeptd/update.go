package fakeptd

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
)

// The limits ptd puts on names and environments (docs/env-and-secrets.md).
var (
	nameRE   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$`)
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

const (
	maxEnvVarBytes   = 128 * 1024 // one KEY=VALUE plus its NUL
	maxEnvTotalBytes = 256 * 1024 // all of them
)

// envTooLarge checks an environment against ptd's limits and returns the
// error code and message, or "" when it fits.
func envTooLarge(env map[string]string) (code, msg string) {
	total := 0
	for _, k := range slices.Sorted(maps.Keys(env)) {
		n := len(k) + 1 + len(env[k]) + 1
		if n > maxEnvVarBytes {
			return "env_var_too_large", fmt.Sprintf("%s=… is %d bytes with its NUL; the limit per variable is %d", k, n, maxEnvVarBytes)
		}
		total += n
	}
	if total > maxEnvTotalBytes {
		return "env_too_large", fmt.Sprintf("the environment would be %d bytes; the limit is %d", total, maxEnvTotalBytes)
	}
	return "", ""
}

// writeEnvErr answers an envTooLarge code the way ptd does: 413 for the
// whole environment, 400 naming the env field for one variable.
func writeEnvErr(w http.ResponseWriter, code, msg string) {
	if code == "env_too_large" {
		writeErr(w, 413, code, msg)
		return
	}
	writeErr(w, 400, code, msg, "field", "env")
}

// nameTaken reports whether a live sandbox other than except has name.
// Callers hold mu.
func (s *Server) nameTaken(name, except string) bool {
	for _, sb := range s.sandboxes {
		if sb.ID != except && sb.State != "deleted" && sb.Name != nil && *sb.Name == name {
			return true
		}
	}
	return false
}

// inTree reports whether sb matches a parent_id filter: "" matches all,
// "none" top-level sandboxes, anything else that parent's children.
func inTree(sb *Sandbox, parent string) bool {
	switch parent {
	case "":
		return true
	case "none":
		return sb.ParentID == nil
	}
	return sb.ParentID != nil && *sb.ParentID == parent
}

// hasMetadata reports whether sb's metadata has every pair of md. As on
// ptd, last_start is the platform's and no filter matches it.
func hasMetadata(sb *Sandbox, md map[string]string) bool {
	for k, v := range md {
		if got, ok := sb.Metadata[k]; !ok || got != v || k == "last_start" {
			return false
		}
	}
	return true
}

// newestFirst sorts rows the way ptd lists: created_at, then id, descending.
func newestFirst(rows []*Sandbox) {
	slices.SortFunc(rows, func(a, b *Sandbox) int {
		if c := b.CreatedAt.Compare(a.CreatedAt.Time); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
}

// childrenOf returns id's children that are not deleted, newest first.
// Callers hold mu.
func (s *Server) childrenOf(id string) []*Sandbox {
	var rows []*Sandbox
	for _, sb := range s.sandboxes {
		if sb.State != "deleted" && inTree(sb, id) {
			rows = append(rows, sb)
		}
	}
	newestFirst(rows)
	return rows
}

// liveChildren returns the sorted IDs of id's live children. Callers hold mu.
func (s *Server) liveChildren(id string) []string {
	var ids []string
	for _, sb := range s.childrenOf(id) {
		if sb.State != "deleting" {
			ids = append(ids, sb.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func (s *Server) children(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lookup(w, r, true) == nil {
		return
	}
	rows := s.childrenOf(r.PathValue("id"))
	if rows == nil {
		rows = []*Sandbox{}
	}
	writeJSON(w, 200, map[string]any{"rows": rows})
}

// patchSandbox is PATCH /v1/sandboxes/{id}: {"name": "x" | null,
// "auto_resume": bool}, the fields sent and no others.
func (s *Server) patchSandbox(w http.ResponseWriter, r *http.Request) {
	var raw map[string]json.RawMessage
	if !decodeStrict(w, r, &raw) {
		return
	}
	var (
		name       *string
		setName    bool
		autoResume *bool
	)
	for k, v := range raw {
		switch k {
		case "name":
			setName = true
			if string(v) == "null" {
				continue
			}
			var n string
			if json.Unmarshal(v, &n) != nil {
				writeErr(w, 400, "invalid_request", "name must be a string or null", "field", "name")
				return
			}
			if n == "" {
				writeErr(w, 400, "invalid_request", "name must not be empty; send null to clear it", "field", "name")
				return
			}
			if !nameRE.MatchString(n) {
				writeErr(w, 400, "invalid_request", "name must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", "field", "name")
				return
			}
			name = &n
		case "auto_resume":
			var b bool
			if json.Unmarshal(v, &b) != nil {
				writeErr(w, 400, "invalid_request", "auto_resume must be true or false", "field", "auto_resume")
				return
			}
			autoResume = &b
		default:
			writeErr(w, 400, "invalid_request", fmt.Sprintf("unknown field %q; PATCH takes name and auto_resume", k), "field", k)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r, false)
	if sb == nil {
		return
	}
	if name != nil && s.nameTaken(*name, sb.ID) {
		writeErr(w, 409, "conflict", fmt.Sprintf("name %q is taken by another live sandbox", *name))
		return
	}
	if setName {
		sb.Name = name
	}
	if autoResume != nil {
		sb.AutoResume = autoResume
	}
	sb.UpdatedAt = Time{s.now()}
	writeJSON(w, 200, sb)
}

// patchEnv is PATCH /v1/sandboxes/{id}/env: {"env": {"K": "v", "OLD":
// null}} merged into the sandbox's environment. The answer names keys only.
func (s *Server) patchEnv(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Env map[string]*string `json:"env"`
	}
	if !decodeStrict(w, r, &b) {
		return
	}
	if b.Env == nil {
		writeErr(w, 400, "invalid_request", "env is required: an object of KEY: value, or KEY: null to remove", "field", "env")
		return
	}
	set := map[string]string{}
	for k, v := range b.Env {
		if !envKeyRE.MatchString(k) {
			writeErr(w, 400, "invalid_request", fmt.Sprintf("key %q must match [A-Za-z_][A-Za-z0-9_]*", k), "field", "env")
			return
		}
		if v != nil {
			set[k] = *v
		}
	}
	if code, msg := envTooLarge(set); code == "env_var_too_large" {
		writeErr(w, 400, code, msg, "field", "env")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r, false)
	if sb == nil {
		return
	}
	merged := maps.Clone(sb.Env)
	if merged == nil {
		merged = map[string]string{}
	}
	for k, v := range b.Env {
		if v == nil {
			delete(merged, k)
		} else {
			merged[k] = *v
		}
	}
	if code, msg := envTooLarge(merged); code != "" {
		writeEnvErr(w, code, msg)
		return // a rejected patch changes nothing
	}
	sb.Env = merged
	sb.EnvKeys = slices.Sorted(maps.Keys(merged))
	sb.UpdatedAt = Time{s.now()}
	applies := "next_start"
	if sb.State == "running" {
		applies = "next_exec"
	}
	writeJSON(w, 200, map[string]any{"id": sb.ID, "state": sb.State, "env_keys": sb.EnvKeys, "applies": applies})
}
