package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/syncs"
)

// CreateRequest is a validated-on-use create call.
type CreateRequest struct {
	// platformMetadata lets the platform's own creates (warm pools,
	// sessions) set its metadata keys, which callers may not.
	platformMetadata bool

	Template string
	CPU      *float64
	RAMMB    *int
	DiskGB   *int
	Name     string
	Env      map[string]string
	Metadata map[string]string
	// Type picks retention defaults (persistent, ephemeral, dev); the
	// Auto* fields override one timer each (0 disables it).
	Type            string
	AutoStopMinutes *int
	AutoArchiveDays *int
	AutoDeleteDays  *int
	// TTL, when positive, deletes the sandbox that long after create
	// (compatibility surfaces; ttl_ms's limits do not apply).
	TTL time.Duration
	// TTLMs is ttl_ms: positive, at most TTLConfig.MaxCreate.
	// Nil takes the default (see ttlFor).
	TTLMs *int64
	// TemplateVersionID pins an immutable template version (tplv_…)
	// instead of the slug's newest.
	TemplateVersionID string
	// ParentID makes the sandbox a child of a running sandbox of the same
	// org; it is set once and never moves.
	ParentID     string
	NoAutoResume bool
	// Secrets are sealed at rest and reach the sandbox only as
	// placeholders.
	Secrets map[string]SecretInput
	// Runtime picks the runtime class; empty means the server default.
	Runtime string
	// FromSnapshot (snap_…) or FromBackup (bkp_…) makes the sandbox a
	// clone: template, size and runtime come from the source (see
	// snapshots.go, backups.go).
	FromSnapshot, FromBackup string
	// Network is the egress policy; nil is the default (egress allowed).
	Network *sandbox.NetworkPolicy
	// ProjectID picks the project (prj_…); empty means the parent's for a
	// child, else the org's default project.
	ProjectID string
	// SSHKeys are authorized_keys lines for the SSH gateway (sshkeys.go).
	SSHKeys []string
	// GPUs and GPUModel ask for whole GPUs of the host (gpus.go).
	GPUs     int
	GPUModel string
}

// retention resolves the type's defaults and the overrides.
func (r *CreateRequest) retention() (sandbox.Retention, error) {
	ret, ok := sandbox.DefaultRetention(r.Type)
	if !ok {
		return ret, &sandbox.FieldError{Field: "type", Reason: "must be persistent, ephemeral or dev"}
	}
	for _, o := range []struct {
		field string
		v     *int
		dst   *int
	}{{"auto_stop_minutes", r.AutoStopMinutes, &ret.AutoStopMinutes}, {"auto_archive_days", r.AutoArchiveDays, &ret.AutoArchiveDays}, {"auto_delete_days", r.AutoDeleteDays, &ret.AutoDeleteDays}} {
		if o.v == nil {
			continue
		}
		if *o.v < 0 || *o.v > 100000 {
			return ret, &sandbox.FieldError{Field: o.field, Reason: "must be between 0 (disabled) and 100000"}
		}
		*o.dst = *o.v
	}
	return ret, nil
}

var (
	nameRE   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$`)
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// validate fills defaults and returns a FieldError for the first bad field.
func (r *CreateRequest) validate() (cpu float64, ram, disk int, err error) {
	cpu, ram, disk = sandbox.DefaultCPU, sandbox.DefaultRAM, sandbox.DefaultDisk
	if r.Template == "" {
		return 0, 0, 0, &sandbox.FieldError{Field: "template", Reason: "is required (e.g. \"busybox\" or \"pt-base\")"}
	}
	if r.CPU != nil {
		cpu = *r.CPU
		if math.IsNaN(cpu) || cpu <= 0 || cpu > sandbox.MaxCPU {
			return 0, 0, 0, &sandbox.FieldError{Field: "cpu", Reason: fmt.Sprintf("must be greater than 0 and at most %d", sandbox.MaxCPU)}
		}
	}
	if r.RAMMB != nil {
		ram = *r.RAMMB
		if ram < sandbox.MinRAMMB || ram > sandbox.MaxRAMMB {
			return 0, 0, 0, &sandbox.FieldError{Field: "ram_mb", Reason: fmt.Sprintf("must be between %d and %d", sandbox.MinRAMMB, sandbox.MaxRAMMB)}
		}
	}
	if r.DiskGB != nil {
		disk = *r.DiskGB
		if disk <= 0 || disk > sandbox.MaxDiskGB {
			return 0, 0, 0, &sandbox.FieldError{Field: "disk_gb", Reason: fmt.Sprintf("must be between 1 and %d", sandbox.MaxDiskGB)}
		}
	}
	if r.Name != "" && !nameRE.MatchString(r.Name) {
		return 0, 0, 0, &sandbox.FieldError{Field: "name", Reason: "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"}
	}
	if err := ValidateEnv(r.Env); err != nil {
		return 0, 0, 0, err
	}
	if err := validateMetadata(r.Metadata); err != nil {
		return 0, 0, 0, err
	}
	return cpu, ram, disk, nil
}

// Env limits from Linux: one KEY=VALUE string (with its NUL) must fit
// MAX_ARG_STRLEN, and the whole environment is kept well below ARG_MAX.
const (
	MaxEnvVarBytes   = 128 * 1024
	MaxEnvTotalBytes = 256 * 1024
)

// ValidateEnv checks key syntax and Linux's size limits.
func ValidateEnv(env map[string]string) error {
	if err := validateEnvVars(env); err != nil {
		return err
	}
	if n := envBytes(env); n > MaxEnvTotalBytes {
		return fmt.Errorf("environment is %d bytes; the limit is %d: %w", n, MaxEnvTotalBytes, ErrEnvTooLarge)
	}
	return nil
}

// EnvVarTooLargeError is one KEY=VALUE string over Linux's per-string
// limit (MAX_ARG_STRLEN).
type EnvVarTooLargeError struct {
	Key   string
	Bytes int
}

func (e *EnvVarTooLargeError) Error() string {
	return fmt.Sprintf("%s=… is %d bytes with its NUL; the limit per variable is %d", e.Key, e.Bytes, MaxEnvVarBytes)
}

// Unwrap makes errors.Is(err, sandbox.ErrInvalidArgument) hold.
func (e *EnvVarTooLargeError) Unwrap() error { return sandbox.ErrInvalidArgument }

// validateEnvVars checks each key and each KEY=VALUE string.
func validateEnvVars(env map[string]string) error {
	for k, v := range env {
		if !envKeyRE.MatchString(k) {
			return &sandbox.FieldError{Field: "env", Reason: fmt.Sprintf("key %q must match [A-Za-z_][A-Za-z0-9_]*", k)}
		}
		if n := len(k) + 1 + len(v) + 1; n > MaxEnvVarBytes {
			return &EnvVarTooLargeError{Key: k, Bytes: n}
		}
	}
	return nil
}

// LastStartKey is the metadata key under which answers show a sandbox's
// latest start. It is the platform's: stored in the record's own
// LastStart field, never in the user's metadata map, so it counts against
// no limit and no metadata filter matches it; a user may not set it.
const LastStartKey = "last_start"

// platformMetadataKeys are the keys the platform itself writes into a
// sandbox's metadata (warm pools and sessions find their sandboxes by
// them). A user may read and filter on them but never set them: a forged
// pt_pool_ready would make a user's sandbox claimable by another org's
// session, and a patch keeps them (see Update).
var platformMetadataKeys = []string{store.MetaPool, store.MetaPoolReady, store.MetaPoolClaim, store.MetaSessionID, MetaRelocatedAt}

// validateUserMetadata is validateMetadata for metadata a caller sends:
// the platform's own keys are refused too.
func validateUserMetadata(md map[string]string) error {
	for _, k := range platformMetadataKeys {
		if _, ok := md[k]; ok {
			return &sandbox.FieldError{Field: "metadata", Reason: fmt.Sprintf("key %s is the platform's (set on pooled and session sandboxes); use another key", k)}
		}
	}
	return validateMetadata(md)
}

// userMetadata is md without the platform's keys: what a copy of a
// sandbox (a fork) inherits.
func userMetadata(md map[string]string) map[string]string {
	out := maps.Clone(md)
	for _, k := range platformMetadataKeys {
		delete(out, k)
	}
	return out
}

func validateMetadata(md map[string]string) error {
	if _, ok := md[LastStartKey]; ok {
		return &sandbox.FieldError{Field: "metadata", Reason: "key last_start is the platform's (the latest start, shown as metadata.last_start); use another key"}
	}
	if len(md) > 16 {
		return &sandbox.FieldError{Field: "metadata", Reason: "at most 16 keys"}
	}
	total := 0
	for k, v := range md {
		if k == "" || len(k) > 64 {
			return &sandbox.FieldError{Field: "metadata", Reason: "keys must be 1 to 64 characters"}
		}
		if len(v) > 512 {
			return &sandbox.FieldError{Field: "metadata", Reason: fmt.Sprintf("value of %q is over 512 characters", k)}
		}
		total += len(k) + len(v)
	}
	if total > 4096 {
		return &sandbox.FieldError{Field: "metadata", Reason: "over 4 KB in total"}
	}
	return nil
}

// Create records a new sandbox and starts provisioning it in the
// background. It returns the record in state creating.
func (s *Service) create(ctx context.Context, p Principal, r CreateRequest) (sandbox.Sandbox, error) {
	if !s.RunsSandboxes() {
		// An api-only ptd (docs/operating.md): forwarding places creates
		// on hosts; one that reaches here (a session's, or no host takes
		// any) is refused before anything is written.
		return sandbox.Sandbox{}, fmt.Errorf("create: this ptd runs no sandboxes (--role=api); send it to a ptd that does: %w", sandbox.ErrUnavailable)
	}
	idemTag, tookOver, since := idempotencyFrom(ctx)
	if tookOver {
		// The key's first attempt died with its process: if it committed
		// the sandbox, this retry answers with it.
		if sb, ok, err := s.idempotentSandbox(ctx, p, idemTag, since); err != nil || ok {
			return sb, err
		}
	}
	src, err := s.resolveSource(ctx, p, &r)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	custom, err := s.resolveTemplate(ctx, p, &r)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if custom != nil && src == nil {
		applyTemplateDefaults(&r, *custom)
	}
	cpu, ram, disk, err := r.validate()
	if err == nil && !r.platformMetadata {
		err = validateUserMetadata(r.Metadata)
	}
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	sshKeys, err := ParseSSHKeys(r.SSHKeys)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	ret, err := r.retention()
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	ttl, session, err := s.ttlFor(&r)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if session && r.Type == "" && r.AutoStopMinutes == nil {
		// A session template's sandbox lives until its TTL or a kill; inactivity
		// shows as status idle instead of stopping it.
		ret.AutoStopMinutes = 0
	}
	if r.Runtime == "" {
		r.Runtime = s.cfg.DefaultRuntime
	}
	if !slices.Contains(s.host.Classes(), r.Runtime) {
		return sandbox.Sandbox{}, &sandbox.FieldError{Field: "runtime", Reason: fmt.Sprintf("must be one of %v on this host", s.host.Classes())}
	}
	if err := s.validateGPUs(r.GPUs, r.GPUModel); err != nil {
		return sandbox.Sandbox{}, err
	}
	if r.TTL < 0 {
		return sandbox.Sandbox{}, &sandbox.FieldError{Field: "ttl", Reason: "must be positive"}
	}
	if !s.tpl.known(r.Template) && custom == nil {
		return sandbox.Sandbox{}, fmt.Errorf("template %q: %w", r.Template, &sandbox.NotFoundFieldError{Name: "template"})
	}
	if p.SandboxID != "" {
		if r.ParentID != "" && r.ParentID != p.SandboxID {
			return sandbox.Sandbox{}, fmt.Errorf("parent %q: %w", r.ParentID, &sandbox.NotFoundFieldError{Name: "parent_id"})
		}
		r.ParentID = p.SandboxID
	}
	parentProject := ""
	if r.ParentID != "" {
		parent, err := s.Get(ctx, Principal{OrgID: p.OrgID, ProjectID: p.ProjectID}, r.ParentID, false)
		if err != nil {
			return sandbox.Sandbox{}, fmt.Errorf("parent %q: %w", r.ParentID, &sandbox.NotFoundFieldError{Name: "parent_id"})
		}
		parentProject = parent.ProjectID
		if parent.State != sandbox.StateRunning {
			return sandbox.Sandbox{}, &StateError{State: parent.State, Want: "running to create children (the parent)"}
		}
		if err := s.checkTreeQuota(ctx, p.OrgID, r.ParentID, cpu, ram); err != nil {
			return sandbox.Sandbox{}, err
		}
	}
	// Before anything is written (the sandbox's token included): a data
	// dir too full for a new disk refuses the create whole.
	if err := s.EnsureSpace(0); err != nil {
		return sandbox.Sandbox{}, err
	}
	projectID, err := s.tenancy.ProjectFor(ctx, p, r.ProjectID, parentProject)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if err := s.hostAccepts(ctx); err != nil {
		return sandbox.Sandbox{}, err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	sb := sandbox.Sandbox{
		ProjectID: projectID,
		ID:        sandbox.NewID(sandbox.PrefixSandbox), OrgID: p.OrgID, Name: r.Name,
		State: sandbox.StateCreating, Template: r.Template,
		CPU: cpu, RAMMB: ram, DiskGB: disk,
		Env: nonNil(r.Env), Metadata: nonNil(r.Metadata),
		HostID: s.host.ID(), AgentToken: randomToken(),
		CreatedAt: now, UpdatedAt: now,
		Retention: ret, LastActivityAt: &now, ParentID: r.ParentID, NoAutoResume: r.NoAutoResume,
		Runtime: r.Runtime, IdempotencyTag: idemTag,
		GPUs: r.GPUs, GPUModel: strings.TrimSpace(r.GPUModel),
	}
	if len(sshKeys) > 0 {
		sb.SSHKeys = sshKeys
	}
	if ttl > 0 {
		exp := now.Add(ttl)
		sb.ExpiresAt, sb.ExpiryAction, sb.TTLMs = &exp, sandbox.ExpireDelete, ttl.Milliseconds()
	}
	// Secrets and the network policy are resolved before a warm claim: a
	// claim applies the same ones a cold create would boot with.
	if sb.Secrets, err = s.sealSecrets(sb.ID, r.Secrets); err != nil {
		return sandbox.Sandbox{}, err
	}
	if sb.Network, err = s.networkForCreate(ctx, p, r.Network); err != nil {
		return sandbox.Sandbox{}, err
	}
	coldDemand := false // the pool had none ready: demand once stored
	if s.warmEligible(p, r, sb, src != nil, custom != nil) {
		sb.TemplateVersionID = r.TemplateVersionID
		warm, ok, demand, err := s.claimWarm(ctx, sb, r.Secrets)
		coldDemand = demand
		switch {
		case errors.Is(err, store.ErrConflict) && r.Name != "":
			return sandbox.Sandbox{}, fmt.Errorf("name %q is taken by another live sandbox: %w", r.Name, sandbox.ErrConflict)
		case err != nil:
			return sandbox.Sandbox{}, err
		case ok:
			return s.created(ctx, warm), nil
		}
	}
	sb.Start = sandbox.StartCold
	if sb.APIToken, err = s.issueSandboxToken(ctx, sb); err != nil {
		return sandbox.Sandbox{}, err
	}
	sb.TemplateVersionID = r.TemplateVersionID
	if src != nil {
		sb.SourceSnapshotID, sb.TemplateVersionID = src.ID, src.Source.TemplateVersionID
	}
	unlockQuota, err := s.tenancy.LockQuota(ctx, p.OrgID)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	err = s.tenancy.CheckQuota(ctx, p.OrgID, cpu, ram)
	if err == nil {
		err = s.store.CreateSandbox(ctx, sb)
	}
	unlockQuota()
	if err != nil {
		if errors.Is(err, store.ErrConflict) && r.Name != "" {
			return sandbox.Sandbox{}, fmt.Errorf("name %q is taken by another live sandbox: %w", r.Name, sandbox.ErrConflict)
		}
		return sandbox.Sandbox{}, err
	}
	sb.Version = 1
	if coldDemand {
		s.noteColdDemand(ctx, sb)
	}
	s.bg.GoFor(ctx, func(ctx context.Context) { s.provision(ctx, sb.ID) })
	return s.created(ctx, sb), nil
}

// created records and logs a create that stored sb (booting cold, or
// handed a warm one) and returns sb as the API shows it.
func (s *Service) created(ctx context.Context, sb sandbox.Sandbox) sandbox.Sandbox {
	s.event(ctx, sb, "created", map[string]any{"cpu": sb.CPU, "ram_mb": sb.RAMMB, "disk_gb": sb.DiskGB})
	s.log.InfoContext(ctx, "sandbox created", "sandbox", sb.ID, "org", sb.OrgID, "template", sb.Template, "start", sb.Start)
	s.derive(ctx, &sb)
	return sb
}

// idempotentSandbox finds the sandbox of p's org a keyed create tagged
// tag at or after since (an older one is an earlier, expired use of the
// key). It scans the org's sandboxes, newest first: it runs only for a
// retry that took over a crashed request's key.
func (s *Service) idempotentSandbox(ctx context.Context, p Principal, tag string, since time.Time) (sandbox.Sandbox, bool, error) {
	rows, _, err := s.store.ListSandboxes(ctx, store.ListOptions{OrgID: p.OrgID, IncludeDeleted: true})
	if err != nil {
		return sandbox.Sandbox{}, false, err
	}
	since = since.Truncate(time.Second)
	for _, sb := range rows {
		if sb.CreatedAt.Before(since) {
			break // newest first: the rest are older still
		}
		if sb.IdempotencyTag == tag {
			s.derive(ctx, &sb)
			return sb, true, nil
		}
	}
	return sandbox.Sandbox{}, false, nil
}

// Get returns a live sandbox of p's org; deleted ones only when asked.
func (s *Service) Get(ctx context.Context, p Principal, id string, includeDeleted bool) (sandbox.Sandbox, error) {
	if sandbox.ValidID(sandbox.PrefixSession, id) {
		return sandbox.Sandbox{}, &IDKindError{Field: "id", Got: "session_id", Want: "sandbox_id (sbx_…)", ID: id,
			Hint: "use /v1/sessions/" + id + " and its exec and files routes"}
	}
	if !sandbox.ValidID(sandbox.PrefixSandbox, id) {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	sb, err := s.store.GetSandbox(ctx, p.OrgID, id)
	if err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, err)
	}
	if sb.State == sandbox.StateDeleted && !includeDeleted {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q was deleted: %w", id, sandbox.ErrNotFound)
	}
	if p.SandboxID != "" && sb.ParentID != p.SandboxID {
		// A sandbox's token reaches only that sandbox's children.
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	if p.ProjectID != "" && sb.ProjectID != p.ProjectID {
		// A project token reaches only its project's sandboxes.
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	s.progressMu.Lock()
	if pr, ok := s.progress[id]; ok {
		sb.Progress = &pr
	}
	s.progressMu.Unlock()
	s.derive(ctx, &sb)
	return sb, nil
}

// ListRequest filters and pages a list.
type ListRequest struct {
	State  sandbox.State
	Limit  int
	Offset int
	// ParentID lists one sandbox's children; "none" lists top-level ones.
	ParentID string
	Metadata map[string]string
	// ProjectID lists one project's sandboxes.
	ProjectID string
	// Include brings back what lists leave out by default: "destroyed"
	// (deleting and deleted) and "failed". A State filter wins over it.
	Include []string
}

// List returns one page of p's sandboxes and the total count.
func (s *Service) List(ctx context.Context, p Principal, r ListRequest) ([]sandbox.Sandbox, int, error) {
	if r.State != "" && !r.State.Valid() {
		return nil, 0, &sandbox.FieldError{Field: "state", Reason: fmt.Sprintf("unknown state %q", r.State)}
	}
	if r.Limit == 0 {
		r.Limit = 50
	}
	if r.Limit < 1 || r.Limit > 200 {
		return nil, 0, &sandbox.FieldError{Field: "limit", Reason: "must be between 1 and 200"}
	}
	if r.Offset < 0 {
		return nil, 0, &sandbox.FieldError{Field: "offset", Reason: "must not be negative"}
	}
	o := store.ListOptions{OrgID: p.OrgID, State: r.State, Limit: r.Limit, Offset: r.Offset, Metadata: r.Metadata, ProjectID: r.ProjectID}
	if p.ProjectID != "" {
		if r.ProjectID != "" && r.ProjectID != p.ProjectID {
			return []sandbox.Sandbox{}, 0, nil
		}
		o.ProjectID = p.ProjectID
	}
	if p.SandboxID != "" {
		if r.ParentID != "" && r.ParentID != p.SandboxID {
			return []sandbox.Sandbox{}, 0, nil
		}
		r.ParentID = p.SandboxID
	}
	switch {
	case r.ParentID == "none":
		o.RootsOnly = true
	case r.ParentID != "":
		o.ParentID = r.ParentID
	}
	var err error
	if o.ExcludeStates, o.IncludeDeleted, err = listExclusions(r.Include); err != nil {
		return nil, 0, err
	}
	rows, total, err := s.store.ListSandboxes(ctx, o)
	for i := range rows {
		s.derive(ctx, &rows[i])
	}
	return rows, total, err
}

// Delete marks the sandbox deleting and tears it down in the background.
// Deleting a sandbox that is already being deleted returns it unchanged.
func (s *Service) Delete(ctx context.Context, p Principal, id string) (sandbox.Sandbox, error) {
	if _, err := s.Get(ctx, p, id, false); err != nil {
		return sandbox.Sandbox{}, err
	}
	kids, err := s.liveChildren(ctx, p.OrgID, id)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if len(kids) > 0 {
		return sandbox.Sandbox{}, &ChildrenError{Children: kids}
	}
	return s.deleteWithReason(ctx, id, "user_deleted")
}

// platformReasons are the deletions the platform decides by itself: a
// TTL's expiry (the ttl_ms or the platform's default TTL), pool upkeep, a
// host that lost the sandbox's disk (host_lost, ensureRunning), an
// organization's deletion (org_deleted, DeleteOrg) and an explicit
// platform deletion. Everything else — a DELETE, a kill, a session's end,
// an auto_delete_days timer or an ephemeral sandbox's stop, which the
// customer configured — is the user's.
var platformReasons = map[string]bool{"ttl_expired": true, "platform_deleted": true, "pool_discarded": true, "pool_drained": true,
	"host_lost": true, "org_deleted": true}

// deletedBy is who caused a deletion for reason (sandbox.DeletedBy).
func deletedBy(reason string) string {
	if platformReasons[reason] {
		return sandbox.DeletedByPlatform
	}
	return sandbox.DeletedByUser
}

// deleteWithReason moves a live sandbox to deleting (any org) and starts
// its teardown, recording the reason (deleted_reason) and who caused it
// (deletedBy): user_deleted, user_killed, auto_deleted, session_* are the
// user's; ttl_expired, platform_deleted, pool_* the platform's.
func (s *Service) deleteWithReason(ctx context.Context, id, reason string) (sandbox.Sandbox, error) {
	for {
		sb, err := s.store.GetSandbox(ctx, "", id)
		if err != nil {
			return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, err)
		}
		if sb.State == sandbox.StateDeleting || sb.State == sandbox.StateDeleted {
			return sb, nil
		}
		sb.State, sb.Reason, sb.DeletedBy = sandbox.StateDeleting, reason, deletedBy(reason)
		sb, err = s.update(ctx, sb)
		if isConflict(err) {
			continue // someone else moved it; re-read and try again
		}
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		s.log.InfoContext(ctx, "sandbox deleting", "sandbox", id, "reason", reason)
		s.bg.GoFor(ctx, func(ctx context.Context) { s.teardown(ctx, id) })
		return sb, nil
	}
}

// WaitFor waits until the sandbox reaches target (or failed, or deleted),
// or until timeout runs out. It returns the last record read and whether
// target was reached. Waits wake on committed changes and re-check the
// state before sleeping again; a backstop poll covers other writers.
func (s *Service) WaitFor(ctx context.Context, p Principal, id string, target sandbox.State, timeout time.Duration) (sandbox.Sandbox, bool, error) {
	if timeout <= 0 {
		timeout = s.cfg.DefaultWait
	}
	timeout = min(timeout, s.cfg.MaxWait)
	var sb sandbox.Sandbox
	reached := false
	_, err := syncs.Wait(ctx, timeout, s.cfg.PollInterval, func() <-chan struct{} { return s.notify.Channel(id) }, func() (bool, error) {
		got, err := s.Get(ctx, p, id, true)
		if err != nil {
			sb = sandbox.Sandbox{}
			return false, err
		}
		sb = got
		// Archived (and archiving) sandboxes are stopped ones too, and an
		// ephemeral sandbox is deleted because it stopped.
		reached = sb.State == target || (target == sandbox.StateStopped && (sb.State == sandbox.StateArchived || sb.State == sandbox.StateArchiving ||
			stoppedEphemeral(sb)))
		return reached || unreachable(sb.State, target), nil
	})
	return sb, reached, err
}

// stoppedEphemeral reports whether sb is an ephemeral sandbox deleted
// because it stopped (deleted_reason auto_deleted).
func stoppedEphemeral(sb sandbox.Sandbox) bool {
	return (sb.State == sandbox.StateDeleting || sb.State == sandbox.StateDeleted) &&
		sb.Retention.Type == sandbox.TypeEphemeral && sb.Reason == "auto_deleted"
}

// unreachable reports whether a sandbox in state cur can no longer reach
// target without a new request, so a wait should end now.
func unreachable(cur, target sandbox.State) bool {
	if target == sandbox.StateDeleted {
		return false
	}
	return cur == sandbox.StateFailed || cur == sandbox.StateDeleting || cur == sandbox.StateDeleted
}

// update writes sb with a version check and wakes its waiters. from is
// the state sb was read in; the write is refused unless the lifecycle
// table allows from → sb.State.
func (s *Service) update(ctx context.Context, sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	cur, err := s.store.GetSandbox(ctx, "", sb.ID)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if cur.Version != sb.Version {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q changed meanwhile: %w", sb.ID, store.ErrConflict)
	}
	if !sandbox.CanTransition(cur.State, sb.State) {
		return sandbox.Sandbox{}, &StateError{State: cur.State, Want: "in a state that can become " + string(sb.State)}
	}
	sb.UpdatedAt = time.Now().UTC()
	out, err := s.store.UpdateSandbox(ctx, sb)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	// Recorded before waiters wake, so one that reads the metrics after
	// its wait sees this transition.
	observeTransition(cur, out)
	s.notify.Broadcast(sb.ID)
	return out, nil
}

// transition re-reads the sandbox and moves it to state `to` if it is in
// `from`, retrying on version conflicts. It reports false when the sandbox
// was in another state.
func (s *Service) transition(ctx context.Context, id string, from, to sandbox.State, mutate func(*sandbox.Sandbox)) (sandbox.Sandbox, bool, error) {
	for {
		sb, err := s.store.GetSandbox(ctx, "", id)
		if err != nil {
			return sandbox.Sandbox{}, false, err
		}
		if sb.State != from {
			return sb, false, nil
		}
		sb.State = to
		if mutate != nil {
			mutate(&sb)
		}
		out, err := s.update(ctx, sb)
		if isConflict(err) {
			continue
		}
		if err != nil {
			return sandbox.Sandbox{}, false, err
		}
		return out, true, nil
	}
}

// provision brings a creating sandbox to running, or to failed with a
// reason. Its template is made ready first, then it waits for a boot slot
// (boots.go) — holding nothing, so a delete meanwhile ends the wait — and
// boots under the sandbox's lock, so a delete's teardown waits for the
// boot. The boot's deadline starts with its slot. One provision per
// sandbox runs at a time (a reconciler pass finding a create still queued
// does not start another).
func (s *Service) provision(ctx context.Context, id string) {
	if _, busy := s.provisioning.LoadOrStore(id, true); busy {
		return
	}
	defer s.provisioning.Delete(id)
	t0 := time.Now()
	log := s.log.With("sandbox", id)
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil || sb.State != sandbox.StateCreating {
		return
	}
	fail := func(reason string, err error) {
		log.ErrorContext(ctx, "sandbox provisioning failed", "reason", reason, "err", err)
		s.failCreate(context.WithoutCancel(ctx), id, fmt.Sprintf("%s: %v", reason, err))
	}
	// A pinned version (template_version_id, or a retried create that
	// was given one) runs as it is; otherwise the slug's newest ready one.
	var v store.TemplateVersion
	if pinned, perr := s.store.GetTemplateVersion(ctx, sb.TemplateVersionID); sb.TemplateVersionID != "" && perr == nil && pinned.Status == store.TemplateReady {
		v = pinned
	} else if !s.tpl.known(sb.Template) {
		fail("template", fmt.Errorf("template version %s of %q is gone", sb.TemplateVersionID, sb.Template))
		return
	} else if v, err = s.tpl.ready(ctx, sb.Template); err != nil {
		if ctx.Err() != nil {
			return // shutting down: the next start reconciles
		}
		unlock := s.locks.Lock(id)
		defer unlock()
		fail("template", err)
		return
	}
	// The version's rootfs on this host, copied here first when it was
	// built elsewhere (template_copies.go); no lock is held meanwhile.
	rootfs, err := s.templateRootFS(ctx, v)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		unlock := s.locks.Lock(id)
		defer unlock()
		fail("template", err)
		return
	}
	pctx, done, ok := s.bootSlot(ctx, id, sandbox.StateCreating)
	if !ok {
		return // deleted while queued, or shutting down
	}
	defer done()
	unlock := s.locks.Lock(id)
	defer unlock()
	if sb, err = s.store.GetSandbox(ctx, "", id); err != nil || sb.State != sandbox.StateCreating {
		return
	}
	spec := s.startSpec(sb, rootfs)
	if spec.Clone, err = s.cloneSpec(pctx, sb); err != nil {
		if ctx.Err() == nil {
			fail("snapshot", err)
		}
		return
	}
	// A custom template's started state is restored like a clone's
	// snapshot, when the sandbox has its size and class.
	coldReason := ""
	if spec.Clone == nil {
		if why := s.startedStateElsewhere(ctx, v); why != "" {
			coldReason = why
		} else {
			spec.Clone, coldReason = startedCloneSpec(sb, v)
		}
	}
	sb.TemplateVersionID = v.ID
	t1 := time.Now()
	inst, err := s.host.Start(pctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		fail("start", err)
		return
	}
	t2 := time.Now()
	if err := s.initAgent(pctx, sb, inst); err != nil {
		var re *ReadyError
		if errors.As(err, &re) {
			fail("template", err)
		} else {
			fail("agent init", err)
		}
		return
	}
	t3 := time.Now()
	now := s.now()
	_, ok, err = s.transition(ctx, id, sandbox.StateCreating, sandbox.StateRunning, func(sb *sandbox.Sandbox) {
		sb.Address, sb.Reason, sb.TemplateVersionID = inst.Address, "", v.ID
		sb.Live = s.headroom(*sb)
		// Idle time and the auto-stop timer count from here, as after a
		// start: a create that took longer than --idle-after on a busy
		// host is not idle the moment it runs.
		sb.LastActivityAt = &now
		sb.LastStart = cloneStart(spec.Clone, inst, now)
		if coldReason != "" {
			sb.LastStart = &sandbox.LastStart{Restore: sandbox.RestoreDiskOnly, At: now, Reason: coldReason}
		}
	})
	if err != nil {
		log.ErrorContext(ctx, "record running", "err", err)
		return
	}
	if ok {
		s.watchOOM(sb)
		log.InfoContext(ctx, "sandbox running", "address", inst.Address)
		// Where the create's time went outside the host (bench -only-cold-create
		// reports these beside the host's "sandbox started" steps);
		// before_start includes the wait for a boot slot.
		log.DebugContext(ctx, "sandbox provisioned", "queued", t0.Sub(sb.CreatedAt), "before_start", t1.Sub(t0),
			"host_start", t2.Sub(t1), "agent_init", t3.Sub(t2), "record_running", time.Since(t3))
	}
}

func (s *Service) startSpec(sb sandbox.Sandbox, rootfs string) StartSpec {
	return StartSpec{ID: sb.ID, RootFS: rootfs, CPU: sb.CPU, RAMMB: sb.RAMMB, DiskGB: sb.DiskGB, AgentToken: sb.AgentToken, Runtime: sb.Runtime,
		Network: s.networkSpec(sb), GPUs: sb.GPUs, GPUModel: sb.GPUModel}
}

// teardown destroys a deleting sandbox's host resources and marks it
// deleted. On failure it stays deleting and the reconciler retries.
func (s *Service) teardown(ctx context.Context, id string) {
	unlock := s.locks.Lock(id)
	defer unlock()
	if sb, err := s.store.GetSandbox(ctx, "", id); err != nil || sb.State != sandbox.StateDeleting {
		return
	}
	s.forgetAgent(id)
	s.hangups.take(id)
	if err := s.host.Destroy(ctx, id); err != nil {
		s.log.ErrorContext(ctx, "sandbox teardown", "sandbox", id, "err", err)
		return
	}
	now := time.Now().UTC()
	if _, _, err := s.transition(ctx, id, sandbox.StateDeleting, sandbox.StateDeleted, func(sb *sandbox.Sandbox) {
		sb.DeletedAt, sb.Address = &now, ""
	}); err != nil {
		s.log.ErrorContext(ctx, "record deleted", "sandbox", id, "err", err)
		return
	}
	s.log.InfoContext(ctx, "sandbox deleted", "sandbox", id)
}

// Reconcile converges host state with the store after a start: builds left
// half-done fail, creating sandboxes are provisioned again, running ones
// whose container is gone are started again on their own disk, and
// deleting ones finish tearing down. It runs again every interval until
// ctx ends, so nothing stays in a transitional state.
func (s *Service) Reconcile(ctx context.Context) error {
	if err := s.tpl.failInterruptedBuilds(ctx); err != nil {
		return fmt.Errorf("reconcile templates: %w", err)
	}
	if err := s.failInterruptedTemplateBuilds(ctx); err != nil {
		return fmt.Errorf("reconcile template builds: %w", err)
	}
	s.bg.Go(s.sweepUploads)
	s.reconcileSnapshots(ctx)
	s.oomOnce.Do(func() { s.bg.Go(s.reportOOM) })
	checks, err := s.reconcilePass(ctx, true)
	if err != nil {
		return err
	}
	// Checking (and on a host reboot, booting) every running sandbox can
	// take a while: start-up does not wait for it. The sweep of what no
	// live record owns follows the checks.
	s.bg.Go(func(ctx context.Context) {
		s.runChecks(ctx, checks)
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "sweep", "err", err)
		}
	})
	return nil
}

// reconcilePass is one pass of the reconciler: it drives again every
// transitional state a crash left (at start-up) or that is stuck past its
// deadline — each such operation runs in the background, as the call that
// began it did, and they are few — and returns the checks of the running
// sandboxes (one each: is it still running on its host?), which the
// caller runs on the bounded pool of runChecks. Running sandboxes are the
// many: one goroutine each on every pass would grow with the fleet.
func (s *Service) reconcilePass(ctx context.Context, startup bool) ([]func(context.Context), error) {
	sbs, err := s.store.SandboxesInStates(ctx, sandbox.StateCreating, sandbox.StateRunning, sandbox.StateDeleting,
		sandbox.StateStarting, sandbox.StateStopping, sandbox.StateArchiving, sandbox.StateRestoring)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	sbs = s.mine(sbs)
	var checks []func(context.Context)
	deadline := s.cfg.TransitionDeadline
	if deadline <= 0 {
		deadline = s.cfg.ProvisionTimeout + time.Minute
	}
	for _, sb := range sbs {
		// A transitional state left by a crash (or stuck past its
		// deadline) is driven again: each step is idempotent.
		stuck := startup || time.Since(sb.UpdatedAt) > deadline
		switch sb.State {
		case sandbox.StateStarting:
			if stuck {
				s.bg.Go(func(ctx context.Context) { s.doStart(ctx, sb.ID) })
			}
		case sandbox.StateStopping:
			if stuck {
				s.bg.Go(func(ctx context.Context) { s.doStop(ctx, sb.ID, true) })
			}
		case sandbox.StateArchiving:
			if stuck {
				s.bg.Go(func(ctx context.Context) { s.doArchive(ctx, sb.ID) })
			}
		case sandbox.StateRestoring:
			switch {
			case relocating(sb):
				// Moved here by another host (relocate.go): at once.
				s.bg.Go(func(ctx context.Context) { s.driveRelocation(ctx, sb.ID) })
			case stuck:
				s.bg.Go(func(ctx context.Context) { s.doRestoring(ctx, sb.ID) })
			}
		case sandbox.StateCreating:
			if stuck {
				s.bg.Go(func(ctx context.Context) { s.provision(ctx, sb.ID) })
			}
		case sandbox.StateDeleting:
			s.bg.Go(func(ctx context.Context) { s.teardown(ctx, sb.ID) })
		case sandbox.StateRunning:
			checks = append(checks, func(ctx context.Context) {
				if startup {
					// The host's egress proxy starts empty: hand it the
					// sandbox's rules again (ensureRunning does on a reboot).
					s.reapplyNetwork(ctx, sb.ID)
				}
				s.ensureRunning(ctx, sb.ID, reasonNotRunning)
			})
		}
	}
	return checks, nil
}

// runChecks runs checks on at most Config.ReconcileWorkers goroutines and
// returns once every one has run (or ctx ended, leaving the rest to the
// next pass).
func (s *Service) runChecks(ctx context.Context, checks []func(context.Context)) {
	n := min(max(s.cfg.ReconcileWorkers, 1), len(checks))
	next := make(chan func(context.Context))
	var wg sync.WaitGroup
	wg.Add(n)
	for range n {
		go func() {
			defer wg.Done()
			for check := range next {
				check(ctx)
			}
		}()
	}
	defer wg.Wait()
	defer close(next)
	for _, check := range checks {
		select {
		case next <- check:
		case <-ctx.Done():
			return
		}
	}
}

// Reasons of a processes_lost event (its data's reason): the reconciler
// found the sandbox not running, or its host reported how it ended.
const (
	reasonNotRunning = "not running on its host"
	reasonEnded      = "its container ended on its host without ptd ending it (killed, or crashed)"
	reasonOOM        = "its host ended it as a whole for memory (see its oom_killed event)"
)

// ensureRunning restarts a sandbox recorded as running whose container is
// gone (host reboot, runtime crash) on its own disk; lost is the reason
// its processes_lost event gives (reasonNotRunning when nothing more is
// known).
func (s *Service) ensureRunning(ctx context.Context, id, lost string) {
	sb, unlock, ok := s.lockIn(ctx, id, sandbox.StateRunning)
	if !ok {
		return
	}
	defer unlock()
	if s.host.Running(ctx, id) {
		s.watchOOM(sb) // covers sandboxes a previous ptd started
		return
	}
	log := s.log.With("sandbox", id)
	if dc, ok := s.host.(hostapi.DiskChecker); ok && !dc.HasDisk(id) {
		// Nothing to boot it from: the platform disposes of it. A complete
		// archive or backup stays recoverable for the platform retention.
		log.WarnContext(ctx, "sandbox recorded running but its host lost its disk; deleting it", "reason", "host_lost")
		if _, err := s.deleteWithReason(ctx, id, "host_lost"); err != nil {
			log.ErrorContext(ctx, "host-loss disposal", "err", err)
		}
		return
	}
	log.WarnContext(ctx, "sandbox recorded running but not running on its host; starting it again")
	// Its processes are gone (pt-agent, its init, exited or was killed, or
	// the runtime or host lost it): say so on the feed, since the restart
	// below is cold and what ran in it does not come back.
	s.event(ctx, sb, "processes_lost", map[string]any{"reason": lost, "action": "restarted"})
	inst, err := s.boot(ctx, sb)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		log.ErrorContext(ctx, "restart after host loss failed", "err", err)
		s.markFailed(ctx, id, sandbox.StateRunning, "restart after host loss: "+err.Error(), nil)
		return
	}
	s.forgetAgent(id)
	s.transition(ctx, id, sandbox.StateRunning, sandbox.StateRunning, func(sb *sandbox.Sandbox) { sb.Address = inst.Address })
	s.watchOOM(sb)
}

// RunReconciler runs a reconciler pass every interval until ctx ends, in
// one loop: a pass (its checks included) ends before the next begins, so
// passes never pile up on a slow host, and a tick missed meanwhile is
// dropped rather than queued.
func (s *Service) RunReconciler(ctx context.Context, interval time.Duration) {
	s.bg.Loop(ctx, interval, false, nil, func(ctx context.Context) {
		checks, err := s.reconcilePass(ctx, false)
		if err != nil {
			s.log.WarnContext(ctx, "reconcile", "err", err)
			return
		}
		s.runChecks(ctx, checks)
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "sweep", "err", err)
		}
	}, nil)
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// initAgent hands the sandbox's environment to its agent and, on a cold
// boot, re-seeds /etc/pt-env (what boot services and terminal shells
// source) from the current values, never the create-time ones.
func (s *Service) initAgent(ctx context.Context, sb sandbox.Sandbox, inst Instance) error {
	if s.noAgentInit {
		return nil
	}
	ag := s.agent(sb.ID, inst.Address, sb.AgentToken)
	// A custom template's user and working directory are the agent's
	// defaults; its start_cmd and ready_cmd run once the env is in place.
	set := s.versionSettings(ctx, sb.TemplateVersionID)
	if err := setGuestEnv(ctx, ag, agentclient.InitRequest{Env: s.sandboxEnv(sb), User: set.User, Workdir: set.Workdir}, !inst.MemoryRestored); err != nil {
		return err
	}
	return s.startTemplateProcesses(ctx, ag, set, inst.MemoryRestored)
}

// setGuestEnv hands req to the sandbox's agent and, when seed is set,
// has it rewrite /etc/pt-env from req.Env in the same request (a boot
// whose memory was restored keeps the file its processes read). A cold
// boot and a warm claim set a guest's environment through it alike.
func setGuestEnv(ctx context.Context, ag *agentclient.Client, req agentclient.InitRequest, seed bool) error {
	req.EnvScript = seed
	return ag.InitWith(ctx, req)
}
