package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/dockerfile"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Custom templates (docs/templates.md): an org builds its own template
// from an image, an image tarball or a Dockerfile. Every build that
// succeeds adds an immutable version of the org's slug; one that fails
// adds none. Another org never sees them (404); the platform's templates
// are visible to all, and their slugs cannot be taken.

// TemplateBuildConfig tunes custom template builds.
type TemplateBuildConfig struct {
	// CPU, RAMMB and DiskGB size every build sandbox.
	CPU    float64
	RAMMB  int
	DiskGB int
	// Timeout bounds one build (a request may ask for less).
	Timeout time.Duration
	// MaxConcurrent builds run at once; more wait for a slot.
	MaxConcurrent int
	// ContextMaxBytes caps an uploaded build context, ImageMaxBytes an
	// uploaded image tarball (larger uploads are 413, nothing stored).
	ContextMaxBytes int64
	ImageMaxBytes   int64
	// UploadBucket holds uploads (in Config.Objects) until a build
	// consumes them or UploadTTL passes.
	UploadBucket string
	UploadTTL    time.Duration
	// CacheMaxEntries bounds an org's layer cache (least recently used
	// steps are dropped beyond it).
	CacheMaxEntries int
	// LogMaxBytes caps one build's stored log.
	LogMaxBytes int
	// ReadyTimeout is a template's ready_cmd wait when it names none;
	// MaxReadyTimeout the most it may name.
	ReadyTimeout, MaxReadyTimeout time.Duration
}

// DefaultTemplateBuildConfig returns the defaults.
func DefaultTemplateBuildConfig() TemplateBuildConfig {
	return TemplateBuildConfig{
		CPU: 2, RAMMB: 2048, DiskGB: 10, Timeout: 30 * time.Minute, MaxConcurrent: 2,
		ContextMaxBytes: 256 << 20, ImageMaxBytes: 8 << 30, UploadBucket: "platinum-template-uploads",
		UploadTTL: 24 * time.Hour, CacheMaxEntries: 500, LogMaxBytes: 4 << 20,
		ReadyTimeout: 60 * time.Second, MaxReadyTimeout: 10 * time.Minute,
	}
}

// slugRE is what a custom template's slug looks like.
var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// TemplateSettingsInput are the settings a build request gives; nil
// fields keep what the image or Dockerfile says (or the server default).
type TemplateSettingsInput struct {
	// StartCmd and ReadyCmd are argv; an empty slice clears the image's.
	StartCmd, ReadyCmd *[]string
	ReadyTimeoutMs     *int
	Env                map[string]string
	User, Workdir      *string
	CPU                *float64
	RAMMB, DiskGB      *int
	Runtime            *string
}

// CreateTemplateRequest is a build of a custom template: exactly one of
// FromImage, ImageUploadID and Dockerfile.
type CreateTemplateRequest struct {
	Slug            string
	FromImage       string
	ImageUploadID   string
	Dockerfile      string
	ContextUploadID string
	BuildArgs       map[string]string
	NoCache         bool
	// Snapshot checkpoints the started sandbox (start_cmd running,
	// ready_cmd passed) so creates restore it instead of booting.
	Snapshot bool
	// Network is the build sandboxes' egress policy (default: allowed).
	Network *sandbox.NetworkPolicy
	// Timeout, when positive, is shorter than the server's build timeout.
	Timeout  time.Duration
	Settings TemplateSettingsInput
}

// TemplateError is a build request refused with a stable code: an image
// that cannot be pulled, a Dockerfile the builder does not take, an upload
// too large. It unwraps to its category.
type TemplateError struct {
	Code  string
	Field string
	// Line is the Dockerfile line at fault (0 when none).
	Line int
	// MaxBytes is the limit an upload passed.
	MaxBytes int64
	Err      error
}

func (e *TemplateError) Error() string { return e.Err.Error() }
func (e *TemplateError) Unwrap() error { return e.Err }

// BuildKind says what a build starts from.
const (
	BuildFromImage  = "image"
	BuildFromUpload = "upload"
	BuildDockerfile = "dockerfile"
)

// TemplateBuild is a build as the API shows it.
type TemplateBuild struct {
	store.TemplateBuild
	Kind string
	// Number is the version's number once ready.
	Number int
}

// buildRequestRecord is what a build's record keeps of its request: no
// credentials, no build argument values.
type buildRequestRecord struct {
	Kind            string   `json:"kind"`
	FromImage       string   `json:"from_image,omitempty"`
	ImageUploadID   string   `json:"image_upload_id,omitempty"`
	ContextUploadID string   `json:"context_upload_id,omitempty"`
	From            string   `json:"from,omitempty"`
	BuildArgs       []string `json:"build_args,omitempty"`
	NoCache         bool     `json:"no_cache,omitempty"`
	Snapshot        bool     `json:"snapshot,omitempty"`
	// Host is the host whose ptd runs the build: another ptd sharing
	// the store leaves it running while that host is not lost
	// (failInterruptedTemplateBuilds). Empty in records made before it
	// was kept.
	Host string `json:"host,omitempty"`
}

// templateBase is what a Dockerfile's FROM resolved to.
type templateBase struct {
	// version is a template FROM's version (nil for an image, or for a
	// platform template not built yet: slug then names it).
	version *store.TemplateVersion
	slug    string
	// image and digest name an image FROM; info is its config.
	image, digest string
	info          hostapi.ImageInfo
	auth          hostapi.RegistryAuth
}

// pendingBuild is an accepted build and what it needs.
type pendingBuild struct {
	mu       sync.Mutex // guards rec once the build runs
	rec      store.TemplateBuild
	req      CreateTemplateRequest
	kind     string
	auth     hostapi.RegistryAuth // for FromImage
	file     *dockerfile.File
	plan     dockerfile.Plan
	base     templateBase
	timeout  time.Duration
	network  *sandbox.NetworkPolicy
	versionN string // the version ID this build will make
}

// CreateTemplate validates a build request, checks at once what can be
// checked (the slug, the Dockerfile, that the image exists and the org's
// credentials may pull it, that uploads exist), then starts the build in
// the background and returns its record. A refused request changes
// nothing.
func (s *Service) CreateTemplate(ctx context.Context, p Principal, r CreateTemplateRequest) (TemplateBuild, error) {
	if p.SandboxID != "" {
		return TemplateBuild{}, fmt.Errorf("a sandbox's token cannot build templates: %w", sandbox.ErrForbidden)
	}
	tp, ok := s.host.(hostapi.Templater)
	if !ok {
		return TemplateBuild{}, fmt.Errorf("this host cannot build custom templates: %w", sandbox.ErrUnavailable)
	}
	pb := &pendingBuild{req: r}
	if err := s.checkTemplateRequest(ctx, p, pb); err != nil {
		return TemplateBuild{}, err
	}
	switch {
	case r.FromImage != "":
		pb.kind = BuildFromImage
		auth, err := s.registryAuth(ctx, p.OrgID, r.FromImage)
		if err != nil {
			return TemplateBuild{}, err
		}
		pb.auth = auth
		info, err := tp.ResolveImage(ctx, r.FromImage, auth)
		if err != nil {
			return TemplateBuild{}, templateImageErr("from_image", err)
		}
		pb.base = templateBase{image: r.FromImage, digest: info.Digest, info: info, auth: auth}
	case r.ImageUploadID != "":
		pb.kind = BuildFromUpload
		if err := s.checkUpload(ctx, p.OrgID, uploadImage, r.ImageUploadID, "image_upload_id"); err != nil {
			return TemplateBuild{}, err
		}
	default:
		pb.kind = BuildDockerfile
		if err := s.planDockerfile(ctx, p, tp, pb); err != nil {
			return TemplateBuild{}, err
		}
	}
	if err := s.checkSnapshotSetting(pb); err != nil {
		return TemplateBuild{}, err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	rec := buildRequestRecord{Kind: pb.kind, FromImage: r.FromImage, ImageUploadID: r.ImageUploadID,
		ContextUploadID: r.ContextUploadID, NoCache: r.NoCache, Snapshot: r.Snapshot, Host: s.host.ID()}
	if pb.kind == BuildDockerfile {
		rec.From = pb.plan.From
	}
	for k := range r.BuildArgs {
		rec.BuildArgs = append(rec.BuildArgs, k)
	}
	sort.Strings(rec.BuildArgs)
	reqJSON, _ := json.Marshal(rec)
	pb.versionN = sandbox.NewID(sandbox.PrefixTemplateVersion)
	pb.rec = store.TemplateBuild{
		ID: sandbox.NewID(sandbox.PrefixTemplateBuild), OrgID: p.OrgID, Slug: r.Slug, Status: store.BuildRunning,
		Request: string(reqJSON), VersionID: pb.versionN, CreatedAt: now, UpdatedAt: now,
	}
	if err := s.store.CreateTemplateBuild(ctx, pb.rec); err != nil {
		return TemplateBuild{}, err
	}
	s.log.InfoContext(ctx, "template build accepted", "build", pb.rec.ID, "org", p.OrgID, "slug", r.Slug, "kind", pb.kind)
	s.startTemplateBuild(ctx, pb)
	return s.viewBuild(ctx, pb.rec), nil
}

// checkTemplateRequest validates what needs no I/O and the slug.
func (s *Service) checkTemplateRequest(ctx context.Context, p Principal, pb *pendingBuild) error {
	r := &pb.req
	if !slugRE.MatchString(r.Slug) {
		return &sandbox.FieldError{Field: "slug", Reason: "must be 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"}
	}
	if s.tpl.known(r.Slug) {
		return &TemplateError{Code: "template_slug_reserved", Field: "slug",
			Err: fmt.Errorf("%q is a platform template; choose another slug: %w", r.Slug, sandbox.ErrConflict)}
	}
	n := 0
	for _, v := range []string{r.FromImage, r.ImageUploadID, r.Dockerfile} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return &sandbox.FieldError{Field: "from_image", Reason: "give exactly one of from_image, image_upload_id and dockerfile"}
	}
	if r.ContextUploadID != "" && r.Dockerfile == "" {
		return &sandbox.FieldError{Field: "context_upload_id", Reason: "a build context goes with a dockerfile"}
	}
	if len(r.BuildArgs) > 0 && r.Dockerfile == "" {
		return &sandbox.FieldError{Field: "build_args", Reason: "build arguments go with a dockerfile"}
	}
	for k := range r.BuildArgs {
		if !envKeyRE.MatchString(k) {
			return &sandbox.FieldError{Field: "build_args", Reason: fmt.Sprintf("%q is not a valid argument name", k)}
		}
	}
	if r.Timeout < 0 {
		return &sandbox.FieldError{Field: "timeout_seconds", Reason: "must be positive"}
	}
	pb.timeout = s.cfg.TemplateBuilds.Timeout
	if r.Timeout > 0 && r.Timeout < pb.timeout {
		pb.timeout = r.Timeout
	}
	np, err := ValidateNetwork(r.Network)
	if err != nil {
		return err
	}
	pb.network = np
	return s.checkSettings(r.Settings)
}

// checkSettings validates the settings a request gives.
func (s *Service) checkSettings(in TemplateSettingsInput) error {
	for _, c := range []struct {
		field string
		argv  *[]string
	}{{"settings.start_cmd", in.StartCmd}, {"settings.ready_cmd", in.ReadyCmd}} {
		if c.argv == nil {
			continue
		}
		if len(*c.argv) > 0 && (*c.argv)[0] == "" {
			return &sandbox.FieldError{Field: c.field, Reason: "the program must not be empty"}
		}
		for _, a := range *c.argv {
			if strings.ContainsRune(a, 0) {
				return &sandbox.FieldError{Field: c.field, Reason: "must not contain NUL"}
			}
		}
	}
	if in.ReadyTimeoutMs != nil {
		if max := int(s.cfg.TemplateBuilds.MaxReadyTimeout.Milliseconds()); *in.ReadyTimeoutMs < 1 || *in.ReadyTimeoutMs > max {
			return &sandbox.FieldError{Field: "settings.ready_timeout_ms", Reason: fmt.Sprintf("must be between 1 and %d", max)}
		}
	}
	if err := ValidateEnv(in.Env); err != nil {
		var fe *sandbox.FieldError
		if errors.As(err, &fe) {
			fe.Field = "settings." + fe.Field
		}
		return err
	}
	if in.CPU != nil && (math.IsNaN(*in.CPU) || *in.CPU <= 0 || *in.CPU > sandbox.MaxCPU) {
		return &sandbox.FieldError{Field: "settings.cpu", Reason: fmt.Sprintf("must be greater than 0 and at most %d", sandbox.MaxCPU)}
	}
	if in.RAMMB != nil && (*in.RAMMB < sandbox.MinRAMMB || *in.RAMMB > sandbox.MaxRAMMB) {
		return &sandbox.FieldError{Field: "settings.ram_mb", Reason: fmt.Sprintf("must be between %d and %d", sandbox.MinRAMMB, sandbox.MaxRAMMB)}
	}
	if in.DiskGB != nil && (*in.DiskGB <= 0 || *in.DiskGB > sandbox.MaxDiskGB) {
		return &sandbox.FieldError{Field: "settings.disk_gb", Reason: fmt.Sprintf("must be between 1 and %d", sandbox.MaxDiskGB)}
	}
	if in.Runtime != nil && !slices.Contains(s.host.Classes(), *in.Runtime) {
		return &sandbox.FieldError{Field: "settings.runtime", Reason: fmt.Sprintf("must be one of %v on this host", s.host.Classes())}
	}
	if in.User != nil && strings.ContainsAny(*in.User, "\x00\n") {
		return &sandbox.FieldError{Field: "settings.user", Reason: "must be a user name or id, optionally with :group"}
	}
	if in.Workdir != nil && *in.Workdir != "" && !strings.HasPrefix(*in.Workdir, "/") {
		return &sandbox.FieldError{Field: "settings.workdir", Reason: "must be an absolute path"}
	}
	return nil
}

// checkSnapshotSetting refuses snapshot: true where it cannot work: no
// start command, or a runtime class that cannot checkpoint memory here.
func (s *Service) checkSnapshotSetting(pb *pendingBuild) error {
	if !pb.req.Snapshot {
		return nil
	}
	set := s.settingsFor(pb, nil)
	if len(set.StartCmd) == 0 {
		return &sandbox.FieldError{Field: "snapshot", Reason: "a started-state snapshot needs a start_cmd (settings.start_cmd, or the image's ENTRYPOINT/CMD)"}
	}
	if len(set.ReadyCmd) == 0 {
		return &sandbox.FieldError{Field: "snapshot", Reason: "a started-state snapshot needs a ready_cmd: the snapshot is taken once it passes"}
	}
	sn, err := s.snapshotter()
	if err != nil {
		return err
	}
	class := set.Runtime
	if class == "" {
		class = s.cfg.DefaultRuntime
	}
	if ok, why := sn.MemorySnapshots(class); !ok {
		return &MemorySnapshotError{Class: class, Reason: why}
	}
	return nil
}

// planDockerfile parses the Dockerfile, resolves its FROM (an org or
// platform template, else an image) and expands every instruction, so a
// bad line is a 400 before anything runs.
func (s *Service) planDockerfile(ctx context.Context, p Principal, tp hostapi.Templater, pb *pendingBuild) error {
	r := pb.req
	f, err := dockerfile.Parse(r.Dockerfile)
	if err != nil {
		return dockerfileErr(err)
	}
	pb.file = f
	from, err := f.ExpandFrom(r.BuildArgs)
	if err != nil {
		return dockerfileErr(err)
	}
	base := dockerfile.State{}
	switch v, ok, err := s.templateForFrom(ctx, p.OrgID, from); {
	case err != nil:
		return err
	case ok:
		pb.base = templateBase{version: v, slug: from}
		if v != nil {
			set := v.Spec.Settings
			base.Env = envSlice(set.Env)
			base.User, base.Workdir = set.User, set.Workdir
		}
	default:
		auth, err := s.registryAuth(ctx, p.OrgID, from)
		if err != nil {
			return err
		}
		info, err := tp.ResolveImage(ctx, from, auth)
		if err != nil {
			var te *TemplateError
			if errors.As(templateImageErr("dockerfile", err), &te) {
				te.Line = f.FromLine
				return te
			}
			return err
		}
		pb.base = templateBase{image: from, digest: info.Digest, info: info, auth: auth}
		base.Env, base.User, base.Workdir = info.Env, info.User, info.WorkingDir
		base.Entrypoint, base.Cmd = info.Entrypoint, info.Cmd
	}
	if pb.plan, err = f.Plan(base, r.BuildArgs); err != nil {
		return dockerfileErr(err)
	}
	if r.ContextUploadID != "" {
		return s.checkUpload(ctx, p.OrgID, uploadContext, r.ContextUploadID, "context_upload_id")
	}
	return nil
}

// templateForFrom reports whether a FROM names a template the org sees:
// one of its own (its newest ready version), or a platform template (its
// newest ready version; nil when it is not built yet — the build waits for
// it). A FROM with a registry, a tag or a digest is always an image.
func (s *Service) templateForFrom(ctx context.Context, orgID, from string) (*store.TemplateVersion, bool, error) {
	if strings.ContainsAny(from, "/:@") {
		return nil, false, nil
	}
	if v, ok, err := s.latestCustom(ctx, orgID, from); err != nil || ok {
		return &v, ok, err
	}
	if !s.tpl.known(from) {
		return nil, false, nil
	}
	v, err := s.store.LatestTemplateVersion(ctx, from)
	if err == nil && v.Status == store.TemplateReady {
		return &v, true, nil
	}
	return nil, true, nil
}

// latestCustom returns the newest ready version of an org's template.
func (s *Service) latestCustom(ctx context.Context, orgID, slug string) (store.TemplateVersion, bool, error) {
	if orgID == "" || !slugRE.MatchString(slug) {
		return store.TemplateVersion{}, false, nil
	}
	vs, err := s.store.ListTemplateVersionsOf(ctx, orgID, slug)
	if err != nil {
		return store.TemplateVersion{}, false, err
	}
	for _, v := range vs {
		if v.Status == store.TemplateReady {
			return v, true, nil
		}
	}
	return store.TemplateVersion{}, false, nil
}

// dockerfileErr turns a Dockerfile problem into a 400 naming its line.
func dockerfileErr(err error) error {
	var de *dockerfile.Error
	if !errors.As(err, &de) {
		return err
	}
	code := "dockerfile_invalid"
	if de.Unsupported {
		code = "dockerfile_unsupported"
	}
	return &TemplateError{Code: code, Field: "dockerfile", Line: de.Line, Err: err}
}

// templateImageErr gives a host's image error the request field at fault.
func templateImageErr(field string, err error) error {
	var ie *hostapi.ImageError
	if errors.As(err, &ie) {
		return &TemplateError{Code: ie.Code, Field: field, Err: err}
	}
	return err
}

// envSlice renders a settings env as KEY=VALUE lines, sorted.
func envSlice(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// envMap reads KEY=VALUE lines (the last of a key wins).
func envMap(env []string) map[string]string {
	out := map[string]string{}
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok && k != "" {
			out[k] = v
		}
	}
	return out
}

// settingsFor is the settings a build's version gets: what the image (or
// the Dockerfile's final state) says, then what the request overrides.
// info is the pulled image's config when the build knows it better than
// the request did (an uploaded tarball).
func (s *Service) settingsFor(pb *pendingBuild, info *hostapi.ImageInfo) store.TemplateSettings {
	var set store.TemplateSettings
	switch {
	case pb.kind == BuildDockerfile:
		f := pb.plan.Final
		set.Env, set.User, set.Workdir = envMap(f.Env), f.User, f.Workdir
		set.StartCmd = append(append([]string(nil), f.Entrypoint...), f.Cmd...)
		set.Labels, set.ExposedPorts = f.Labels, f.Ports
		if v := pb.base.version; v != nil {
			b := v.Spec.Settings
			set.CPU, set.RAMMB, set.DiskGB, set.Runtime = b.CPU, b.RAMMB, b.DiskGB, b.Runtime
			set.ReadyCmd, set.ReadyTimeoutMs = b.ReadyCmd, b.ReadyTimeoutMs
			if len(f.Entrypoint)+len(f.Cmd) == 0 {
				set.StartCmd = b.StartCmd
			}
		}
	default:
		if info == nil {
			info = &pb.base.info
		}
		set.Env, set.User, set.Workdir = envMap(info.Env), info.User, info.WorkingDir
		set.StartCmd = append(append([]string(nil), info.Entrypoint...), info.Cmd...)
		set.Labels, set.ExposedPorts = info.Labels, info.ExposedPorts
	}
	if set.Workdir == "/" {
		set.Workdir = ""
	}
	in := pb.req.Settings
	override(&set.StartCmd, in.StartCmd)
	override(&set.ReadyCmd, in.ReadyCmd)
	override(&set.ReadyTimeoutMs, in.ReadyTimeoutMs)
	for k, v := range in.Env {
		if set.Env == nil {
			set.Env = map[string]string{}
		}
		set.Env[k] = v
	}
	override(&set.User, in.User)
	override(&set.Workdir, in.Workdir)
	override(&set.CPU, in.CPU)
	override(&set.RAMMB, in.RAMMB)
	override(&set.DiskGB, in.DiskGB)
	override(&set.Runtime, in.Runtime)
	if len(set.StartCmd) == 0 {
		set.StartCmd = nil
	}
	if len(set.Env) == 0 {
		set.Env = nil
	}
	return set
}

// applyTemplateDefaults gives a create from a custom version the
// version's defaults for what the request leaves out: size, runtime and
// environment (the request's env wins key by key).
func applyTemplateDefaults(r *CreateRequest, v store.TemplateVersion) {
	set := v.Spec.Settings
	if r.CPU == nil && set.CPU > 0 {
		c := set.CPU
		r.CPU = &c
	}
	if r.RAMMB == nil && set.RAMMB > 0 {
		m := set.RAMMB
		r.RAMMB = &m
	}
	if r.DiskGB == nil && set.DiskGB > 0 {
		d := set.DiskGB
		r.DiskGB = &d
	}
	if r.Runtime == "" && set.Runtime != "" {
		r.Runtime = set.Runtime
	}
	if len(set.Env) > 0 {
		env := maps.Clone(set.Env)
		maps.Copy(env, r.Env)
		r.Env = env
	}
}

// viewBuild adds what the API shows to a build record.
func (s *Service) viewBuild(ctx context.Context, b store.TemplateBuild) TemplateBuild {
	var rec buildRequestRecord
	json.Unmarshal([]byte(b.Request), &rec)
	out := TemplateBuild{TemplateBuild: b, Kind: rec.Kind}
	if b.Status == store.BuildReady {
		out.Number = s.tpl.number(ctx, b.VersionID)
	}
	return out
}

// GetTemplateBuild returns one of the org's builds of slug.
func (s *Service) GetTemplateBuild(ctx context.Context, p Principal, slug, id string) (TemplateBuild, error) {
	b, err := s.store.GetTemplateBuild(ctx, p.OrgID, id)
	if err != nil || b.Slug != slug {
		return TemplateBuild{}, fmt.Errorf("template build %q: %w", id, sandbox.ErrNotFound)
	}
	return s.viewBuild(ctx, b), nil
}

// Template is a slug with the state of its newest version.
func (s *Service) customTemplateView(ctx context.Context, v store.TemplateVersion) Template {
	return Template{Slug: v.Slug, Version: &v, Number: s.tpl.number(ctx, v.ID)}
}

// ListTemplatesFor returns the platform's templates and the org's own.
func (s *Service) ListTemplatesFor(ctx context.Context, p Principal) ([]Template, error) {
	out, err := s.ListTemplates(ctx)
	if err != nil {
		return nil, err
	}
	vs, err := s.store.ListTemplateVersionsOf(ctx, p.OrgID, "")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, v := range vs { // newest first
		if seen[v.Slug] || v.Status != store.TemplateReady {
			continue
		}
		seen[v.Slug] = true
		out = append(out, s.customTemplateView(ctx, v))
	}
	return out, nil
}

// GetTemplateFor returns a platform template or one of the org's.
func (s *Service) GetTemplateFor(ctx context.Context, p Principal, slug string) (Template, error) {
	if s.tpl.known(slug) {
		return s.GetTemplate(ctx, slug)
	}
	v, ok, err := s.latestCustom(ctx, p.OrgID, slug)
	if err != nil {
		return Template{}, err
	}
	if !ok {
		return Template{}, fmt.Errorf("template %q: %w", slug, sandbox.ErrNotFound)
	}
	return s.customTemplateView(ctx, v), nil
}

// TemplateVersionsFor lists a platform template's builds or the org's
// versions of its own template, newest first.
func (s *Service) TemplateVersionsFor(ctx context.Context, p Principal, slug string) ([]TemplateVersion, error) {
	if s.tpl.known(slug) {
		return s.TemplateVersions(ctx, slug)
	}
	vs, err := s.store.ListTemplateVersionsOf(ctx, p.OrgID, slug)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("template %q: %w", slug, sandbox.ErrNotFound)
	}
	out := make([]TemplateVersion, 0, len(vs))
	for i, v := range vs {
		out = append(out, TemplateVersion{TemplateVersion: v, Number: len(vs) - i})
	}
	return out, nil
}

// TemplateInUseError is a delete refused because sandboxes or snapshots
// still need a version.
type TemplateInUseError struct {
	VersionID string
	Sandboxes []string
	Snapshots []string
}

func (e *TemplateInUseError) Error() string {
	var parts []string
	if len(e.Sandboxes) > 0 {
		parts = append(parts, fmt.Sprintf("sandboxes %v", e.Sandboxes))
	}
	if len(e.Snapshots) > 0 {
		parts = append(parts, fmt.Sprintf("snapshots %v", e.Snapshots))
	}
	return fmt.Sprintf("template version %s is in use by %s; delete them first", e.VersionID, strings.Join(parts, " and "))
}

// Unwrap makes a TemplateInUseError a conflict.
func (e *TemplateInUseError) Unwrap() error { return sandbox.ErrConflict }

// DeleteTemplate deletes one version of the org's template (versionID
// set) or all of them. A version a live sandbox or a snapshot still uses
// is not deleted (409, naming them); nothing is deleted then.
func (s *Service) DeleteTemplate(ctx context.Context, p Principal, slug, versionID string) ([]string, error) {
	if p.SandboxID != "" {
		return nil, fmt.Errorf("a sandbox's token cannot delete templates: %w", sandbox.ErrForbidden)
	}
	if s.tpl.known(slug) {
		return nil, fmt.Errorf("template %q is a platform template and cannot be deleted: %w", slug, sandbox.ErrForbidden)
	}
	vs, err := s.store.ListTemplateVersionsOf(ctx, p.OrgID, slug)
	if err != nil {
		return nil, err
	}
	if versionID != "" {
		vs = slices.DeleteFunc(vs, func(v store.TemplateVersion) bool { return v.ID != versionID })
	}
	if len(vs) == 0 {
		if versionID != "" {
			return nil, fmt.Errorf("template version %q of %q: %w", versionID, slug, sandbox.ErrNotFound)
		}
		return nil, fmt.Errorf("template %q: %w", slug, sandbox.ErrNotFound)
	}
	unlock := s.tpl.lockDelete()
	defer unlock()
	for _, v := range vs {
		if err := s.checkVersionUnused(ctx, p.OrgID, v.ID); err != nil {
			return nil, err
		}
	}
	var deleted []string
	for _, v := range vs {
		if err := s.removeVersion(ctx, v); err != nil {
			return deleted, err
		}
		deleted = append(deleted, v.ID)
	}
	s.pruneLayers(context.WithoutCancel(ctx))
	return deleted, nil
}

// checkVersionUnused returns a TemplateInUseError when a live sandbox or
// a snapshot of the org needs the version.
func (s *Service) checkVersionUnused(ctx context.Context, orgID, versionID string) error {
	sbs, _, err := s.store.ListSandboxes(ctx, store.ListOptions{OrgID: orgID})
	if err != nil {
		return err
	}
	e := &TemplateInUseError{VersionID: versionID}
	for _, sb := range sbs {
		if sb.TemplateVersionID == versionID && sb.State != sandbox.StateDeleted {
			e.Sandboxes = append(e.Sandboxes, sb.ID)
		}
	}
	snaps, err := s.store.ListSnapshots(ctx, store.SnapshotFilter{OrgID: orgID})
	if err != nil {
		return err
	}
	for _, sn := range snaps {
		if sn.Source.TemplateVersionID == versionID {
			e.Snapshots = append(e.Snapshots, sn.ID)
		}
	}
	if len(e.Sandboxes)+len(e.Snapshots) > 0 {
		return e
	}
	return nil
}

// removeVersion deletes a version's record, then its files and
// started-state snapshot (a crash between leaves only files, which the
// start-up sweep removes).
func (s *Service) removeVersion(ctx context.Context, v store.TemplateVersion) error {
	if err := s.store.DeleteTemplateVersion(ctx, v.ID); err != nil {
		return err
	}
	cctx := context.WithoutCancel(ctx)
	if tp, ok := s.host.(hostapi.Templater); ok {
		if err := tp.RemoveTemplate(cctx, v.ID); err != nil {
			s.log.WarnContext(ctx, "template files", "version", v.ID, "err", err)
		}
	}
	if err := s.deleteTemplateArchive(cctx, v.ID); err != nil {
		s.log.WarnContext(ctx, "template version's copy in the object store", "version", v.ID, "err", err)
	}
	if st := v.Spec.Started; st != nil {
		if sn, err := s.snapshotter(); err == nil {
			sn.RemoveSnapshot(cctx, st.SnapshotID)
		}
	}
	s.log.InfoContext(ctx, "template version deleted", "version", v.ID, "slug", v.Slug, "org", v.OrgID)
	return nil
}

// pruneLayers removes stored layers no version needs any more.
func (s *Service) pruneLayers(ctx context.Context) {
	tp, ok := s.host.(hostapi.Templater)
	if !ok {
		return
	}
	vs, err := s.store.ListTemplateVersions(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "prune layers", "err", err)
		return
	}
	keep := map[string]bool{}
	for _, v := range vs {
		for _, l := range v.Spec.Layers {
			keep[l] = true
		}
	}
	// A running build may have stored layers no version names yet.
	if s.builds.running() > 0 {
		return
	}
	if err := tp.PruneLayers(ctx, keep); err != nil {
		s.log.WarnContext(ctx, "prune layers", "err", err)
	}
}
