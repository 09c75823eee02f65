package httpapi

import (
	"encoding/json"
	"slices"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// sandboxView is a sandbox as the API shows it: env values never appear.
type sandboxView struct {
	ID                string            `json:"id"`
	Name              *string           `json:"name"`
	State             sandbox.State     `json:"state"`
	Template          string            `json:"template"`
	TemplateVersionID *string           `json:"template_version_id"`
	CPU               float64           `json:"cpu"`
	RAMMB             int               `json:"ram_mb"`
	DiskGB            int               `json:"disk_gb"`
	EnvKeys           []string          `json:"env_keys"`
	SecretNames       []string          `json:"secret_names"`
	Metadata          map[string]string `json:"metadata"`
	HostID            string            `json:"host_id,omitempty"`
	Runtime           string            `json:"runtime"`
	ParentID          *string           `json:"parent_id"`
	ProjectID         string            `json:"project_id"`
	AutoResume        bool              `json:"auto_resume"`
	// SSHKeyFingerprints identify the SSH gateway's keys; the keys
	// themselves are never echoed.
	SSHKeyFingerprints []string `json:"ssh_key_fingerprints"`
	// GPUs the sandbox gets at each start, of GPUModel when one was asked.
	GPUs            int     `json:"gpus"`
	GPUModel        string  `json:"gpu_model,omitempty"`
	Reason          string  `json:"reason,omitempty"`
	CreatedAt       string  `json:"created_at"`
	UpdatedAt       string  `json:"updated_at"`
	DeletedAt       *string `json:"deleted_at"`
	DeletedReason   string  `json:"deleted_reason,omitempty"`
	Type            string  `json:"type"`
	AutoStopMinutes int     `json:"auto_stop_minutes"`
	AutoArchiveDays int     `json:"auto_archive_days"`
	AutoDeleteDays  int     `json:"auto_delete_days"`
	ExpiresAt       *string `json:"expires_at"`
	// Restore and RAMRestored say what the latest start brought back; they
	// are present only while running (docs/stop-start.md, "What a start restored").
	Restore      *string `json:"restore,omitempty"`
	RAMRestored  *bool   `json:"ram_restored,omitempty"`
	WaitTimedOut *bool   `json:"wait_timed_out,omitempty"`
	// Code is "relocating" on a start's 202 that moved the sandbox to
	// another host (docs/stop-start.md, "Starting while the host is busy").
	Code string `json:"code,omitempty"`
	// Start is how the create got the sandbox running: "warm" (handed a
	// sandbox a warm pool booted ahead) or "cold" (docs/sessions.md,
	// "Warm creates").
	Start string `json:"start,omitempty"`
	// StartsOn says where a stopped or archived sandbox may start:
	// "any_host" or "own_host" (docs/stop-start.md, "Where a stopped
	// sandbox starts").
	StartsOn string `json:"starts_on,omitempty"`
	// Progress shows how far an archive or restore got.
	Progress *sandbox.Progress `json:"progress,omitempty"`
	// Network is the egress policy (the default spelled out).
	Network sandbox.NetworkPolicy `json:"network"`
	// SourceSnapshotID is the snapshot or backup a clone or fork was made
	// from.
	SourceSnapshotID string `json:"source_snapshot_id,omitempty"`
	// CreatedAtList is created_at under its camelCase name for list and
	// child-list rows ("createdAt values … six fractional-second
	// digits"); set by listView only.
	CreatedAtList string `json:"createdAt,omitempty"`
	// Region is the region of the store the sandbox is in (ptd serve
	// --region); empty on a ptd without one.
	Region string `json:"region,omitempty"`
	ttlFields
}

// view is viewSandbox with this ptd's region: every sandbox of its store
// is in it.
func (a *API) view(sb sandbox.Sandbox) sandboxView {
	v := viewSandbox(sb)
	v.Region = a.region
	return v
}

// listRow is listView with this ptd's region.
func (a *API) listRow(sb sandbox.Sandbox) sandboxView {
	v := listView(sb)
	v.Region = a.region
	return v
}

// listView is a sandbox as a list or child-list row.
func listView(sb sandbox.Sandbox) sandboxView {
	v := viewSandbox(sb)
	v.CreatedAtList = v.CreatedAt
	return v
}

// ptr points to a copy of v. The views point to copies rather than into
// their record so the record (a Sandbox is large) stays on the stack.
func ptr[T any](v T) *T { return &v }

func viewSandbox(sb sandbox.Sandbox) sandboxView {
	v := sandboxView{
		ID: sb.ID, State: sb.State, Template: sb.Template,
		CPU: sb.CPU, RAMMB: sb.RAMMB, DiskGB: sb.DiskGB,
		EnvKeys: make([]string, 0, len(sb.Env)), Metadata: sb.Metadata,
		HostID: sb.HostID, Reason: sb.Reason, GPUs: sb.GPUs, GPUModel: sb.GPUModel,
		CreatedAt: sandbox.FormatTime(sb.CreatedAt), UpdatedAt: sandbox.FormatTime(sb.UpdatedAt),
	}
	v.SourceSnapshotID = sb.SourceSnapshotID
	if sb.Name != "" {
		v.Name = ptr(sb.Name)
	}
	if sb.ParentID != "" {
		v.ParentID = ptr(sb.ParentID)
	}
	v.ProjectID = sb.ProjectID
	v.AutoResume = !sb.NoAutoResume
	v.SSHKeyFingerprints = controlplane.SSHKeyFingerprints(sb.SSHKeys)
	v.Network = viewNetwork(sb)
	v.Progress = sb.Progress
	v.Start = sb.Start
	v.StartsOn = sb.StartsOn()
	v.Runtime = sb.Runtime
	if v.Runtime == "" {
		v.Runtime = "runc"
	}
	if sb.TemplateVersionID != "" {
		v.TemplateVersionID = ptr(sb.TemplateVersionID)
	}
	for k := range sb.Env {
		v.EnvKeys = append(v.EnvKeys, k)
	}
	slices.Sort(v.EnvKeys)
	v.SecretNames = make([]string, 0, len(sb.Secrets))
	for k := range sb.Secrets {
		v.SecretNames = append(v.SecretNames, k)
	}
	slices.Sort(v.SecretNames)
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	if sb.DeletedAt != nil {
		s := sandbox.FormatTime(*sb.DeletedAt)
		v.DeletedAt = &s
	}
	if sb.State == sandbox.StateDeleted || sb.State == sandbox.StateDeleting {
		v.DeletedReason = sb.Reason
	}
	v.ttlFields = ttlFieldsOf(sb)
	r := sb.Retention
	v.Type, v.AutoStopMinutes, v.AutoArchiveDays, v.AutoDeleteDays = r.Type, r.AutoStopMinutes, r.AutoArchiveDays, r.AutoDeleteDays
	if sb.ExpiresAt != nil {
		s := sandbox.FormatTime(*sb.ExpiresAt)
		v.ExpiresAt = &s
	}
	if ls := sb.LastStart; ls != nil {
		// The latest start is also shown as metadata.last_start, next to
		// (not among) the user's keys: the record keeps it in its own
		// field, so it counts against no metadata limit and no filter
		// matches it (controlplane.LastStartKey).
		md := make(map[string]string, len(v.Metadata)+1)
		for k, val := range v.Metadata {
			md[k] = val
		}
		b, _ := json.Marshal(ls)
		md[controlplane.LastStartKey] = string(b)
		v.Metadata = md
		if sb.State == sandbox.StateRunning {
			v.Restore, v.RAMRestored = &ls.Restore, &ls.RAMRestored
		}
	}
	return v
}

type templateView struct {
	Slug      string  `json:"slug"`
	VersionID *string `json:"version_id"`
	Status    string  `json:"status"`
	Progress  string  `json:"progress,omitempty"`
	SizeBytes int64   `json:"size_bytes"`
	Error     string  `json:"error,omitempty"`
	CreatedAt *string `json:"created_at"`
	// Version numbers version_id among the slug's builds; Default marks
	// the server's default template (creates that name none).
	Version *int `json:"version"`
	Default bool `json:"default"`
	customFields
}

func viewTemplate(t controlplane.Template) templateView {
	v := templateView{Slug: t.Slug, Status: "not_built", Default: t.Default, customFields: viewCustom(t.Version)}
	if t.Number > 0 {
		v.Version = &t.Number
	}
	if t.Version != nil {
		tv := t.Version
		c := sandbox.FormatTime(tv.CreatedAt)
		v.VersionID, v.Status, v.Progress, v.SizeBytes, v.Error, v.CreatedAt = &tv.ID, string(tv.Status), tv.Progress, tv.SizeBytes, tv.Error, &c
	}
	return v
}
