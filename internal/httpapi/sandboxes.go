package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

type createBody struct {
	Template string            `json:"template"`
	CPU      *float64          `json:"cpu"`
	RAMMB    *int              `json:"ram_mb"`
	DiskGB   *int              `json:"disk_gb"`
	Name     *string           `json:"name"`
	Env      map[string]string `json:"env"`
	Metadata map[string]string `json:"metadata"`
	Wait     bool              `json:"wait"`

	ParentID        string                `json:"parent_id"`
	AutoResume      *bool                 `json:"auto_resume"`
	Secrets         map[string]secretBody `json:"secrets"`
	Network         *networkBody          `json:"network"`
	Runtime         string                `json:"runtime"`
	FromSnapshot    string                `json:"from_snapshot"`
	FromBackup      string                `json:"from_backup"`
	ProjectID       string                `json:"project_id"`
	ProjectIDCamel  string                `json:"projectId"` // the camelCase spelling (docs/api.md)
	Type            string                `json:"type"`
	AutoStopMinutes *int                  `json:"auto_stop_minutes"`
	AutoArchiveDays *int                  `json:"auto_archive_days"`
	AutoDeleteDays  *int                  `json:"auto_delete_days"`
	// A lifetime and a pinned template version.
	TTLMs             *int64 `json:"ttl_ms"`
	TemplateVersionID string `json:"template_version_id"`
	// The camelCase spellings of the same fields (aliases.go, docs/api.md).
	TTLMsCamel             *int64 `json:"ttlMs"`
	TemplateVersionIDCamel string `json:"templateVersionId"`
	ParentIDCamel          string `json:"parentId"`
	// GPUs and GPUModel ask for whole GPUs of the host (docs/gpus.md).
	GPUs     *int   `json:"gpus"`
	GPUModel string `json:"gpu_model"`
	// SSHKeys are authorized_keys lines for the SSH gateway.
	SSHKeys []string `json:"ssh_keys"`
	// Region is where to make the sandbox: this ptd's region (or none).
	Region string `json:"region"`
}

// waitParams reads ?wait_for_state= and ?wait_timeout_ms=.
func waitParams(r *http.Request, allowed ...sandbox.State) (sandbox.State, time.Duration, error) {
	q := r.URL.Query()
	st := sandbox.State(q.Get("wait_for_state"))
	if st != "" {
		ok := false
		for _, a := range allowed {
			ok = ok || st == a
		}
		if !ok {
			return "", 0, badRequest("wait_for_state must be one of "+joinStates(allowed), "wait_for_state")
		}
	}
	var timeout time.Duration
	if v := q.Get("wait_timeout_ms"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return "", 0, badRequest("wait_timeout_ms must be a positive integer", "wait_timeout_ms")
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	return st, timeout, nil
}

// makeParams reads what the calls that make sandboxes (create, restore,
// fork) take: the wait parameters, which can only wait for running, then
// the JSON body into v, as decodeJSON reads it.
func makeParams(r *http.Request, v any, allowEmpty bool) (sandbox.State, time.Duration, error) {
	wait, timeout, err := waitParams(r, sandbox.StateRunning)
	if err != nil {
		return "", 0, err
	}
	return wait, timeout, decodeJSON(r, v, allowEmpty)
}

func joinStates(ss []sandbox.State) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += string(s)
	}
	return out
}

func (a *API) createSandbox(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b createBody
	wait, timeout, err := makeParams(r, &b, false)
	if err != nil {
		return err
	}
	if b.Wait {
		wait = sandbox.StateRunning
	}
	if err := a.checkRegion(b.Region); err != nil {
		return err
	}
	if b.ProjectID, err = aliasString(b.ProjectID, b.ProjectIDCamel, "project_id", "projectId"); err != nil {
		return err
	}
	if b.TemplateVersionID, err = aliasString(b.TemplateVersionID, b.TemplateVersionIDCamel, "template_version_id", "templateVersionId"); err != nil {
		return err
	}
	if b.ParentID, err = aliasString(b.ParentID, b.ParentIDCamel, "parent_id", "parentId"); err != nil {
		return err
	}
	if b.TTLMs, err = aliasPtr(b.TTLMs, b.TTLMsCamel, "ttl_ms", "ttlMs"); err != nil {
		return err
	}
	req := controlplane.CreateRequest{Template: b.Template, CPU: b.CPU, RAMMB: b.RAMMB, DiskGB: b.DiskGB, Env: b.Env, Metadata: b.Metadata,
		Type: b.Type, AutoStopMinutes: b.AutoStopMinutes, AutoArchiveDays: b.AutoArchiveDays, AutoDeleteDays: b.AutoDeleteDays,
		ParentID: b.ParentID, Runtime: b.Runtime, Network: b.Network.policy(), ProjectID: b.ProjectID}
	req.TTLMs, req.TemplateVersionID = b.TTLMs, b.TemplateVersionID
	req.FromSnapshot, req.FromBackup = b.FromSnapshot, b.FromBackup
	req.SSHKeys = b.SSHKeys
	if b.GPUs != nil {
		req.GPUs = *b.GPUs
	}
	req.GPUModel = b.GPUModel
	if b.AutoResume != nil {
		req.NoAutoResume = !*b.AutoResume
	}
	if len(b.Secrets) > 0 {
		req.Secrets = map[string]controlplane.SecretInput{}
		for k, v := range b.Secrets {
			req.Secrets[k] = controlplane.SecretInput{Value: v.Value, Hosts: v.Hosts, Body: v.Body}
		}
	}
	if b.Name != nil {
		req.Name = *b.Name
	}
	sb, err := a.cp.Create(r.Context(), p, req)
	if err != nil {
		return err
	}
	return a.waitAndWrite(w, r, p, sb, wait, timeout, http.StatusCreated, http.StatusCreated)
}

// checkRegion refuses a create for a region other than this ptd's: a
// create for a known peer region was sent there before the API (package
// region), so what reaches here names a region nobody here knows.
func (a *API) checkRegion(name string) error {
	if name == "" || name == a.region {
		return nil
	}
	known := a.regions
	if len(known) == 0 && a.region != "" {
		known = []string{a.region}
	}
	msg := fmt.Sprintf("region %q is not known here; known regions: %s", name, strings.Join(known, ", "))
	if len(known) == 0 {
		msg = fmt.Sprintf("region %q is not known here: this ptd has no region (ptd serve --region); omit region", name)
	}
	return &apiError{status: http.StatusBadRequest, code: "unknown_region", msg: msg,
		extra: map[string]any{"field": "region", "regions": append([]string{}, known...)}}
}

// waitAndWrite is the tail of the calls that take wait parameters: with
// no target (no wait asked for) it answers nowStatus with the record at
// once; else it waits for target and answers okStatus with the record, or
// 202 with wait_timed_out and Retry-After when the wait runs out.
func (a *API) waitAndWrite(w http.ResponseWriter, r *http.Request, p controlplane.Principal, sb sandbox.Sandbox, target sandbox.State, timeout time.Duration, nowStatus, okStatus int) error {
	if target == "" {
		writeJSON(w, nowStatus, a.view(sb))
		return nil
	}
	got, reached, err := a.cp.WaitFor(r.Context(), p, sb.ID, target, timeout)
	if err != nil {
		return err
	}
	v := a.view(got)
	if reached {
		writeJSON(w, okStatus, v)
		return nil
	}
	if got.State == sandbox.StateFailed {
		// Final, and never a 2xx: the target will not come. The body is
		// the record (its id to start or delete, the reason).
		rec := map[string]any{}
		if b, err := json.Marshal(v); err == nil {
			json.Unmarshal(b, &rec)
		}
		return &apiError{status: http.StatusConflict, code: "sandbox_failed", extra: rec,
			msg: fmt.Sprintf("sandbox %s failed before it was %s: %s; start it again (POST /v1/sandboxes/%s/start) or delete it", got.ID, target, got.Reason, got.ID)}
	}
	t := true
	v.WaitTimedOut = &t
	w.Header().Set("Retry-After", "5")
	writeJSON(w, http.StatusAccepted, v)
	return nil
}

func (a *API) listSandboxes(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	q := r.URL.Query()
	var req controlplane.ListRequest
	req.State = sandbox.State(q.Get("state"))
	var err error
	if req.ParentID, err = aliasQuery(q, "parent_id", "parentId"); err != nil {
		return err
	}
	if req.ProjectID, err = aliasQuery(q, "project_id", "projectId"); err != nil {
		return err
	}
	req.Include = listIncludes(r)
	// roots_only (rootsOnly in camelCase) is parent_id=none.
	roots, err := aliasQuery(q, "roots_only", "rootsOnly")
	if err != nil {
		return err
	}
	if rootsOnly, _ := strconv.ParseBool(roots); rootsOnly {
		req.ParentID = "none"
	}
	for k, vs := range q {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") && len(vs) > 0 {
			if req.Metadata == nil {
				req.Metadata = map[string]string{}
			}
			req.Metadata[strings.TrimSuffix(name, "]")] = vs[0]
		}
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{"limit", &req.Limit}, {"offset", &req.Offset}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || (f.name == "limit" && (n < 1 || n > 200)) {
				return badRequest(f.name+" must be an integer (limit: 1 to 200)", f.name)
			}
			*f.dst = n
		}
	}
	paginated := false
	if v := q.Get("paginated"); v != "" {
		var err error
		if paginated, err = strconv.ParseBool(v); err != nil {
			return badRequest("paginated must be true or false", "paginated")
		}
	}
	rows, total, err := a.cp.List(r.Context(), p, req)
	if err != nil {
		return err
	}
	out := map[string]any{}
	views := make([]sandboxView, 0, len(rows))
	for _, sb := range rows {
		views = append(views, a.listRow(sb))
	}
	out["rows"] = views
	if paginated {
		out["total"] = total
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) getSandbox(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	incl, _ := strconv.ParseBool(r.URL.Query().Get("include_deleted"))
	return respond(w, http.StatusOK, a.view)(a.cp.Get(r.Context(), p, r.PathValue("id"), incl))
}

func (a *API) deleteSandbox(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respond(w, http.StatusAccepted, a.view)(a.cp.Delete(r.Context(), p, r.PathValue("id")))
}

func (a *API) listTemplates(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respondRows(w, "rows", viewTemplate)(a.cp.ListTemplatesFor(r.Context(), p))
}

func (a *API) getTemplate(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respond(w, http.StatusOK, viewTemplate)(a.cp.GetTemplateFor(r.Context(), p, r.PathValue("slug")))
}

func (a *API) buildTemplate(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respond(w, http.StatusAccepted, viewTemplate)(a.cp.BuildTemplate(r.Context(), r.PathValue("slug")))
}

func (a *API) createOrg(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	o, tok, err := a.tn.CreateOrg(r.Context(), p, b.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"org":   map[string]any{"id": o.ID, "name": o.Name, "created_at": sandbox.FormatTime(o.CreatedAt)},
		"token": tok,
	})
	return nil
}

func (a *API) deleteOrg(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	d, err := a.cp.DeleteOrg(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{
		"id": d.Org.ID, "name": d.Org.Name, "deleted_at": sandbox.FormatTime(d.DeletedAt), "sandboxes_deleting": d.SandboxesDeleting,
	})
	return nil
}

// lifecycleCall is stop, start or archive: the call, then an optional wait
// for the state it leads to. Reached → 200; wait ran out → 202 with
// wait_timed_out and Retry-After; never a 200 before the target state.
// wait_timeout_ms bounds only the waits (a start's wait for a host start
// slot, then the wait for the state), never the operation: the call gets
// the request's context without the wait's deadline.
func (a *API) lifecycleCall(call func(ctx context.Context, p controlplane.Principal, id string, queueWait time.Duration) (sandbox.Sandbox, error), target sandbox.State) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
		wait, timeout, err := waitParams(r, target)
		if err != nil {
			return err
		}
		deadline := time.Now().Add(timeout) // one deadline for both waits
		sb, err := call(r.Context(), p, r.PathValue("id"), timeout)
		if re, ok := errors.AsType[*controlplane.RelocatingError](err); ok {
			// Finished in the background on the other host: no wait here.
			v := a.view(re.Sandbox)
			v.Code = "relocating"
			w.Header().Set("Retry-After", "5")
			writeJSON(w, http.StatusAccepted, v)
			return nil
		}
		if err != nil {
			return err
		}
		if timeout > 0 {
			timeout = max(time.Until(deadline), time.Millisecond)
		}
		return a.waitAndWrite(w, r, p, sb, wait, timeout, http.StatusOK, http.StatusOK)
	}
}

// unqueued adapts a lifecycle call that has no queue to lifecycleCall.
func unqueued(call func(ctx context.Context, p controlplane.Principal, id string) (sandbox.Sandbox, error)) func(context.Context, controlplane.Principal, string, time.Duration) (sandbox.Sandbox, error) {
	return func(ctx context.Context, p controlplane.Principal, id string, _ time.Duration) (sandbox.Sandbox, error) {
		return call(ctx, p, id)
	}
}

// stop is POST /stop and /pause: ?memory=false (or E2B-style) stops
// disk-only; the default keeps memory where the host can.
func (a *API) stop(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	call := a.cp.Stop
	if v := r.URL.Query().Get("memory"); v != "" {
		keep, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("memory must be true or false", "memory")
		}
		if !keep {
			call = a.cp.StopDiskOnly
		}
	}
	return a.lifecycleCall(unqueued(call), sandbox.StateStopped)(w, r, p)
}

// patchSandbox is PATCH /v1/sandboxes/{id}: {"name": "x" | null,
// "auto_resume": bool, "ssh_keys": [...] | null}. A JSON null name clears
// it; ssh_keys replaces the whole list.
func (a *API) patchSandbox(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var raw map[string]json.RawMessage
	if err := decodeJSON(r, &raw, false); err != nil {
		return err
	}
	var pt controlplane.Patch
	for k, v := range raw {
		switch k {
		case "name":
			name := ""
			if string(v) != "null" {
				if err := json.Unmarshal(v, &name); err != nil {
					return badRequest("name must be a string or null", "name")
				}
				if name == "" {
					return badRequest("name must not be empty; send null to clear it", "name")
				}
			}
			pt.Name = &name
		case "auto_resume":
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				return badRequest("auto_resume must be true or false", "auto_resume")
			}
			pt.AutoResume = &b
		case "ssh_keys":
			var keys []string
			if string(v) != "null" {
				if err := json.Unmarshal(v, &keys); err != nil {
					return badRequest("ssh_keys must be an array of authorized_keys lines, or null to remove them", "ssh_keys")
				}
			}
			pt.SSHKeys = &keys
		default:
			return badRequest(fmt.Sprintf("unknown field %q; PATCH takes name, auto_resume and ssh_keys", k), k)
		}
	}
	return respond(w, http.StatusOK, a.view)(a.cp.Update(r.Context(), p, r.PathValue("id"), pt))
}

// patchEnv is PATCH /v1/sandboxes/{id}/env: {"env": {"K": "v", "OLD": null}}.
// The answer names keys only, never values.
func (a *API) patchEnv(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b struct {
		Env map[string]*string `json:"env"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	if b.Env == nil {
		return badRequest("env is required: an object of KEY: value, or KEY: null to remove", "env")
	}
	res, err := a.cp.PatchEnv(r.Context(), p, r.PathValue("id"), b.Env)
	if err != nil {
		return err
	}
	v := a.view(res.Sandbox)
	writeJSON(w, http.StatusOK, map[string]any{"id": v.ID, "state": v.State, "env_keys": v.EnvKeys, "applies": res.Applies})
	return nil
}

func (a *API) children(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respondRows(w, "rows", a.listRow)(a.cp.Children(r.Context(), p, r.PathValue("id")))
}

// secretBody is a secret at create: "value", or {"value": …, "hosts": […],
// "body": bool}.
type secretBody struct {
	Value string   `json:"value"`
	Hosts []string `json:"hosts"`
	Body  bool     `json:"body"`
}

// UnmarshalJSON accepts both forms.
func (b *secretBody) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		return json.Unmarshal(data, &b.Value)
	}
	type plain secretBody
	var p plain
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return badRequest("each secret is a string or {\"value\": string, \"hosts\": [string], \"body\": bool}", "secrets")
	}
	*b = secretBody(p)
	return nil
}
