package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Custom templates (docs/templates.md): POST /v1/templates, uploads,
// builds and their logs, deletes, registry credentials.

// argv is start_cmd/ready_cmd on the wire: an argv array, or a string run
// by /bin/sh -c ("" and [] clear).
type argv struct {
	v   []string
	set bool
}

func (a *argv) UnmarshalJSON(b []byte) error {
	a.set = true
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if s != "" {
			a.v = []string{"/bin/sh", "-c", s}
		} else {
			a.v = []string{}
		}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return errors.New("want a string or an array of strings")
	}
	a.v = l
	if a.v == nil {
		a.v = []string{}
	}
	return nil
}

func (a argv) ptr() *[]string {
	if !a.set {
		return nil
	}
	v := a.v
	return &v
}

type settingsInput struct {
	StartCmd       argv              `json:"start_cmd"`
	ReadyCmd       argv              `json:"ready_cmd"`
	ReadyTimeoutMs *int              `json:"ready_timeout_ms"`
	Env            map[string]string `json:"env"`
	User           *string           `json:"user"`
	Workdir        *string           `json:"workdir"`
	CPU            *float64          `json:"cpu"`
	RAMMB          *int              `json:"ram_mb"`
	DiskGB         *int              `json:"disk_gb"`
	Runtime        *string           `json:"runtime"`
}

// maxTemplateBody holds a Dockerfile (up to 1 MiB) and the rest.
const maxTemplateBody = 2 << 20

func (a *API) createTemplate(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b struct {
		Slug            string                 `json:"slug"`
		FromImage       string                 `json:"from_image"`
		ImageUploadID   string                 `json:"image_upload_id"`
		Dockerfile      string                 `json:"dockerfile"`
		ContextUploadID string                 `json:"context_upload_id"`
		BuildArgs       map[string]string      `json:"build_args"`
		NoCache         bool                   `json:"no_cache"`
		Snapshot        bool                   `json:"snapshot"`
		Network         *sandbox.NetworkPolicy `json:"network"`
		TimeoutSeconds  *int                   `json:"timeout_seconds"`
		Settings        settingsInput          `json:"settings"`
	}
	if err := decodeJSONLimit(r, &b, false, maxTemplateBody); err != nil {
		return err
	}
	req := controlplane.CreateTemplateRequest{
		Slug: b.Slug, FromImage: b.FromImage, ImageUploadID: b.ImageUploadID, Dockerfile: b.Dockerfile,
		ContextUploadID: b.ContextUploadID, BuildArgs: b.BuildArgs, NoCache: b.NoCache, Snapshot: b.Snapshot, Network: b.Network,
		Settings: controlplane.TemplateSettingsInput{
			StartCmd: b.Settings.StartCmd.ptr(), ReadyCmd: b.Settings.ReadyCmd.ptr(), ReadyTimeoutMs: b.Settings.ReadyTimeoutMs,
			Env: b.Settings.Env, User: b.Settings.User, Workdir: b.Settings.Workdir, CPU: b.Settings.CPU,
			RAMMB: b.Settings.RAMMB, DiskGB: b.Settings.DiskGB, Runtime: b.Settings.Runtime,
		},
	}
	if b.TimeoutSeconds != nil {
		if *b.TimeoutSeconds < 1 {
			return badRequest("timeout_seconds must be at least 1", "timeout_seconds")
		}
		req.Timeout = time.Duration(*b.TimeoutSeconds) * time.Second
	}
	return respond(w, http.StatusAccepted, viewBuild)(a.cp.CreateTemplate(r.Context(), p, req))
}

func (a *API) uploadTemplateFile(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	up, err := a.cp.UploadTemplateFile(r.Context(), p, r.URL.Query().Get("purpose"), r.Body, r.ContentLength)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{"id": up.ID, "purpose": up.Purpose, "size_bytes": up.SizeBytes, "sha256": up.SHA256})
	return nil
}

type buildFailureView struct {
	Step        int    `json:"step"`
	Steps       int    `json:"steps"`
	Line        int    `json:"line"`
	Instruction string `json:"instruction"`
	ExitCode    *int   `json:"exit_code,omitempty"`
}

type buildView struct {
	ID         string            `json:"id"`
	Slug       string            `json:"slug"`
	Status     string            `json:"status"`
	Kind       string            `json:"kind"`
	VersionID  *string           `json:"version_id"`
	Version    *int              `json:"version"`
	Error      string            `json:"error,omitempty"`
	Failure    *buildFailureView `json:"failure,omitempty"`
	CreatedAt  string            `json:"created_at"`
	UpdatedAt  string            `json:"updated_at"`
	FinishedAt *string           `json:"finished_at"`
}

func viewBuild(b controlplane.TemplateBuild) buildView {
	v := buildView{ID: b.ID, Slug: b.Slug, Status: string(b.Status), Kind: b.Kind, Error: b.Error,
		CreatedAt: sandbox.FormatTime(b.CreatedAt), UpdatedAt: sandbox.FormatTime(b.UpdatedAt)}
	if b.Status == store.BuildReady {
		id := b.VersionID
		v.VersionID = &id
		if b.Number > 0 {
			n := b.Number
			v.Version = &n
		}
	}
	if f := b.Failure; f != nil {
		v.Failure = &buildFailureView{Step: f.Step, Steps: f.Steps, Line: f.Line, Instruction: f.Instruction, ExitCode: f.ExitCode}
	}
	if b.FinishedAt != nil {
		t := sandbox.FormatTime(*b.FinishedAt)
		v.FinishedAt = &t
	}
	return v
}

func (a *API) getTemplateBuild(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respond(w, http.StatusOK, viewBuild)(a.cp.GetTemplateBuild(r.Context(), p, r.PathValue("slug"), r.PathValue("build_id")))
}

// templateBuildLogs is GET …/builds/{build_id}/logs: NDJSON lines, or
// Server-Sent Events when asked (Accept: text/event-stream or
// format=sse, as the dashboard reads GET /v1/events), each flushed as it
// comes, until the build ends with ?follow=true. An SSE event's id is the
// line's seq, so a reconnect's Last-Event-ID resumes after it.
func (a *API) templateBuildLogs(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	q := r.URL.Query()
	follow := false
	if v := q.Get("follow"); v != "" {
		f, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("follow must be true or false", "follow")
		}
		follow = f
	}
	sse := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	switch q.Get("format") {
	case "":
	case "sse":
		sse = true
	case "ndjson":
		sse = false
	default:
		return badRequest("format must be ndjson or sse", "format")
	}
	since := 0
	if v := q.Get("since"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest("since must be a line number (seq) of at least 0", "since")
		}
		since = n
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" && sse {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest("Last-Event-ID must be a line number (seq) of at least 0", "Last-Event-ID")
		}
		since = n
	}
	slug, id := r.PathValue("slug"), r.PathValue("build_id")
	// Not found is an error answer; once lines flow, the status is 200.
	if _, err := a.cp.GetTemplateBuild(r.Context(), p, slug, id); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	write := func(line []byte) error { _, err := w.Write(line); return err }
	if sse {
		h.Set("Content-Type", "text/event-stream")
		h.Set("X-Accel-Buffering", "no")
		write = func(line []byte) error { return writeBuildLogSSE(w, line) }
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if sse {
		fmt.Fprint(w, "retry: 2000\n: connected\n\n")
	}
	if flusher != nil {
		flusher.Flush()
	}
	err := a.cp.TemplateBuildLog(r.Context(), p, slug, id, since, follow, func(line []byte) error {
		if err := write(line); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
	if err != nil && r.Context().Err() == nil {
		a.log.WarnContext(r.Context(), "build log stream", "build", id, "err", err)
	}
	return nil
}

// writeBuildLogSSE writes one NDJSON log line as an SSE event: id its
// seq (the resume cursor), event its type, data the line's JSON.
func writeBuildLogSSE(w io.Writer, line []byte) error {
	var hdr struct {
		Seq  int    `json:"seq"`
		Type string `json:"type"`
	}
	line = bytes.TrimRight(line, "\n")
	if err := json.Unmarshal(line, &hdr); err != nil {
		return fmt.Errorf("build log line: %w", err)
	}
	_, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", hdr.Seq, sseField(hdr.Type), line)
	return err
}

func (a *API) deleteTemplate(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	deleted, err := a.cp.DeleteTemplate(r.Context(), p, r.PathValue("slug"), r.PathValue("version_id"))
	if err != nil {
		return err
	}
	if deleted == nil {
		deleted = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": deleted})
	return nil
}

type credentialView struct {
	Registry  string `json:"registry"`
	Username  string `json:"username,omitempty"`
	Kind      string `json:"kind"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

func viewCredential(c controlplane.RegistryCredential) credentialView {
	return credentialView{Registry: c.Registry, Username: c.Username, Kind: c.Kind,
		CreatedAt: sandbox.FormatTime(c.CreatedAt), UpdatedAt: sandbox.FormatTime(c.UpdatedAt)}
}

func (a *API) putRegistryCredential(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Token    string `json:"token"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	return respond(w, http.StatusOK, viewCredential)(a.cp.PutRegistryCredential(r.Context(), p, r.PathValue("registry"), b.Username, b.Password, b.Token))
}

func (a *API) listRegistryCredentials(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respondRows(w, "rows", viewCredential)(a.cp.ListRegistryCredentials(r.Context(), p))
}

func (a *API) deleteRegistryCredential(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return noContent(w, a.cp.DeleteRegistryCredential(r.Context(), p, r.PathValue("registry")))
}

// settingsView is a custom version's settings on the wire.
type settingsView struct {
	StartCmd       []string          `json:"start_cmd,omitempty"`
	ReadyCmd       []string          `json:"ready_cmd,omitempty"`
	ReadyTimeoutMs int               `json:"ready_timeout_ms,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	User           string            `json:"user,omitempty"`
	Workdir        string            `json:"workdir,omitempty"`
	CPU            float64           `json:"cpu,omitempty"`
	RAMMB          int               `json:"ram_mb,omitempty"`
	DiskGB         int               `json:"disk_gb,omitempty"`
	Runtime        string            `json:"runtime,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	ExposedPorts   []string          `json:"exposed_ports,omitempty"`
}

type sourceView struct {
	Kind             string `json:"kind"`
	Image            string `json:"image,omitempty"`
	ImageDigest      string `json:"image_digest,omitempty"`
	FromTemplate     string `json:"from_template,omitempty"`
	DockerfileSHA256 string `json:"dockerfile_sha256,omitempty"`
}

// customFields are what a version of an org template adds to its views.
type customFields struct {
	Owner    string        `json:"owner"`
	BuildID  string        `json:"build_id,omitempty"`
	Settings *settingsView `json:"settings,omitempty"`
	Source   *sourceView   `json:"source,omitempty"`
	Snapshot bool          `json:"snapshot,omitempty"`
}

func viewCustom(v *store.TemplateVersion) customFields {
	if v == nil || v.OrgID == "" {
		return customFields{Owner: "platform"}
	}
	st, src := v.Spec.Settings, v.Spec.Source
	return customFields{Owner: "org", BuildID: v.BuildID, Snapshot: v.Spec.Started != nil,
		Settings: &settingsView{StartCmd: st.StartCmd, ReadyCmd: st.ReadyCmd, ReadyTimeoutMs: st.ReadyTimeoutMs, Env: st.Env,
			User: st.User, Workdir: st.Workdir, CPU: st.CPU, RAMMB: st.RAMMB, DiskGB: st.DiskGB, Runtime: st.Runtime,
			Labels: st.Labels, ExposedPorts: st.ExposedPorts},
		Source: &sourceView{Kind: src.Kind, Image: src.Image, ImageDigest: src.ImageDigest, FromTemplate: src.FromTemplate,
			DockerfileSHA256: src.DockerfileSHA256},
	}
}
