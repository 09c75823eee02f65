// Package fakeptd is an in-memory fake of ptd's REST API (/v1) on an
// httptest.Server, for tests of code built on the Go SDK (the SDK's own
// tests and the pt CLI's use it). It follows the wire contract (shapes,
// status codes, error codes, strict decoding) but runs no sandboxes: exec
// runs a tiny built-in interpreter or a function the test supplies, and files
// live in memory. It deliberately shares no types with the SDK, so a
// mismatch between the SDK and the wire format fails tests.
package fakeptd

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Default tokens the fake accepts. Token is an ordinary org token;
// AdminToken may also create orgs.
const (
	Token      = "pt_test_token"
	AdminToken = "pt_test_admin"
)

// TimeFormat is the API's timestamp format (six fractional digits).
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// Time is a timestamp that encodes in the API's TimeFormat.
type Time struct{ time.Time }

// MarshalJSON writes t in TimeFormat, or null when zero.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + t.UTC().Format(TimeFormat) + `"`), nil
}

// Sandbox is the fake's record of a sandbox, in wire form.
type Sandbox struct {
	ID                string            `json:"id"`
	Name              *string           `json:"name"`
	State             string            `json:"state"`
	Template          string            `json:"template"`
	TemplateVersionID string            `json:"template_version_id"`
	CPU               float64           `json:"cpu"`
	RAMMB             int               `json:"ram_mb"`
	DiskGB            int               `json:"disk_gb"`
	EnvKeys           []string          `json:"env_keys"`
	Metadata          map[string]string `json:"metadata"`
	HostID            string            `json:"host_id"`
	ParentID          *string           `json:"parent_id"`
	// AutoResume is true when nil is given to AddSandbox.
	AutoResume      *bool  `json:"auto_resume"`
	Reason          string `json:"reason,omitempty"`
	CreatedAt       Time   `json:"created_at"`
	UpdatedAt       Time   `json:"updated_at"`
	DeletedAt       *Time  `json:"deleted_at"`
	DeletedReason   string `json:"deleted_reason,omitempty"`
	Type            string `json:"type"`
	AutoStopMinutes int    `json:"auto_stop_minutes"`
	AutoArchiveDays int    `json:"auto_archive_days"`
	AutoDeleteDays  int    `json:"auto_delete_days"`
	ExpiresAt       *Time  `json:"expires_at"`
	// Restore and RAMRestored are set while running after a start.
	Restore     *string `json:"restore,omitempty"`
	RAMRestored *bool   `json:"ram_restored,omitempty"`

	// Env holds the values, which the API never shows.
	Env map[string]string `json:"-"`
	// pollsLeft counts GETs until a creating (or stopping, starting,
	// archiving, restoring) sandbox may move on.
	pollsLeft int
	// from is the state a lifecycle transition started in.
	from string
	// bootRAMMB is the memory the sandbox booted with: a live shrink goes
	// no lower.
	bootRAMMB int
	// periods are the stretches of one state and size, for usage.
	periods []period
}

// Template is the fake's record of a template, in wire form.
type Template struct {
	Slug      string  `json:"slug"`
	VersionID *string `json:"version_id"`
	Status    string  `json:"status"`
	Progress  string  `json:"progress"`
	SizeBytes int64   `json:"size_bytes"`
	Error     string  `json:"error"`
	CreatedAt Time    `json:"created_at"`

	// steps are the progress lines a build still has to show; each GET of
	// the template advances one, and the build is ready after the last.
	steps []string
}

// ExecCall is one exec as the fake received it.
type ExecCall struct {
	SandboxID string
	Argv      []string // set when cmd was an array
	Shell     string   // set when cmd was a string
	Env       map[string]string
	// SandboxEnv is the sandbox's own environment when the command ran
	// (nil when it has none); Env overrides it.
	SandboxEnv map[string]string
	Cwd        string
	TimeoutMS  int64
	Stdin      string
}

// Chunk is one piece of a command's output.
type Chunk struct {
	Stream string // "stdout" or "stderr"
	Data   string
}

// ExecOutcome is what a faked command does: its output, in order, and how
// it ends. A non-empty ErrorCode makes a stream end with an error event (and
// a buffered exec answer with that error) instead of an exit.
type ExecOutcome struct {
	Output    []Chunk
	ExitCode  int
	TimedOut  bool
	ErrorCode string
	ErrorMsg  string
}

// UploadInfo describes the last PUT of a file, for tests that check how the
// body arrived.
type UploadInfo struct {
	Path             string
	ContentLength    int64
	TransferEncoding []string
	Size             int64
}

type fileNode struct {
	dir     bool
	data    []byte
	modTime time.Time
}

// Server is the fake. Configure its exported fields before the first
// request; read its state through its methods.
type Server struct {
	*httptest.Server

	// CreatePolls is how many GETs of a new sandbox it stays creating for
	// (beyond any template build). With 0 and a ready template a waiting
	// create answers 201 running; otherwise it answers 202 wait_timed_out.
	CreatePolls int
	// CreateFailReason, when set, makes new sandboxes end up failed with
	// this reason instead of running.
	CreateFailReason string
	// BuildSteps are the progress lines a template build shows. A build
	// advances one line per GET of the template (and only then, so tests
	// see every line), and is ready after the last. Sandboxes of a building
	// template stay creating until it is ready.
	BuildSteps []string
	// LifecyclePolls is how many GETs a sandbox stays stopping, starting,
	// archiving or restoring for. With 0 a stop, start or archive that asks
	// to wait answers 200 in the target state; otherwise it answers 202
	// wait_timed_out and the client has to poll.
	LifecyclePolls int
	// StartRestore is what a start of a stopped sandbox brings back:
	// "memory" (when empty) or "disk_only". A start of an archived sandbox
	// always reports "disk_only".
	StartRestore string
	// LifecycleFailReason, when set, makes stops, starts and archives end
	// failed with this reason.
	LifecycleFailReason string
	// InterruptReason, when set, makes stops, starts and archives end back
	// in the state they started from, with this reason, the way ptd reports
	// an interrupted archive ("stopped") or restore ("archived").
	InterruptReason string
	// Exec decides what a command does; nil uses a tiny interpreter (echo,
	// cat, printenv, pwd, true, false, sh -c "exit N").
	Exec func(ExecCall) ExecOutcome
	// LiveMaxCPU and LiveMaxRAMMB are the headroom every sandbox boots
	// with: a live resize beyond them answers 409 sandbox_not_resizable.
	// NewServer sets 16 and 16384.
	LiveMaxCPU   float64
	LiveMaxRAMMB int
	// LiveResizeUnsupported, when set, makes every live cpu or ram_mb
	// resize answer 409 sandbox_not_resizable with this reason.
	LiveResizeUnsupported string
	// RAMShrinkFloorMB is the least memory a running sandbox can free down
	// to: a live shrink below it stops there and answers partial: true.
	RAMShrinkFloorMB int
	// DiskGrowUnsupported makes a live disk grow answer 409
	// disk_grow_unsupported.
	DiskGrowUnsupported bool
	// ResizePending makes a resize of a stopped sandbox answer 202 with
	// applies_at: pending instead of 200 with next_start.
	ResizePending bool
	// OnUploadRead, if set, is called after each read of an upload body with
	// the bytes received so far. It runs outside the fake's lock and may
	// block to pace the client.
	OnUploadRead func(total int64)

	mu         sync.Mutex
	seq        int
	clock      time.Time
	sandboxes  map[string]*Sandbox
	templates  map[string]*Template
	files      map[string]map[string]*fileNode
	creates    int
	requests   []string
	execs      []ExecCall
	lastUpload UploadInfo
}

// NewServer starts a fake with templates "busybox" and "pt-base" ready and
// "python" not built. Close it when done.
func NewServer() *Server {
	s := &Server{
		clock:        time.Date(2026, 11, 29, 15, 4, 5, 123456000, time.UTC),
		sandboxes:    map[string]*Sandbox{},
		templates:    map[string]*Template{},
		files:        map[string]map[string]*fileNode{},
		LiveMaxCPU:   16,
		LiveMaxRAMMB: 16384,
		BuildSteps: []string{
			"debootstrap: resolving dependencies",
			"debootstrap: unpacking packages",
			"packing rootfs",
		},
	}
	for _, slug := range []string{"busybox", "pt-base"} {
		s.AddTemplate(slug, "ready")
	}
	s.AddTemplate("python", "not_built")
	s.Server = httptest.NewServer(s.handler())
	return s
}

// now advances the fake clock by a microsecond per call, so every record
// has a distinct, increasing timestamp. Callers hold mu.
func (s *Server) now() time.Time {
	s.clock = s.clock.Add(time.Microsecond)
	return s.clock
}

func (s *Server) nextID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s_01K%023d", prefix, s.seq)
}

// AddTemplate adds (or replaces) a template with the given status. A
// "building" template runs through BuildSteps as it is polled.
func (s *Server) AddTemplate(slug, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &Template{Slug: slug, Status: status}
	switch status {
	case "ready":
		v := s.nextID("tplv")
		t.VersionID, t.SizeBytes, t.CreatedAt = &v, 2<<20, Time{s.now()}
	case "building":
		t.steps = slices.Clone(s.BuildSteps)
	}
	s.templates[slug] = t
}

// AddSandbox stores a sandbox as is (ID, timestamps and defaults are filled
// in when empty) and returns its ID, for seeding lists.
func (s *Server) AddSandbox(sb Sandbox) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb.ID == "" {
		sb.ID = s.nextID("sbx")
	}
	if sb.State == "" {
		sb.State = "running"
	}
	if sb.Template == "" {
		sb.Template = "busybox"
	}
	if sb.CreatedAt.IsZero() {
		sb.CreatedAt = Time{s.now()}
	}
	sb.UpdatedAt = sb.CreatedAt
	if sb.EnvKeys == nil {
		sb.EnvKeys = []string{}
	}
	if sb.Metadata == nil {
		sb.Metadata = map[string]string{}
	}
	if sb.Type == "" {
		r, _ := retention("")
		sb.Type, sb.AutoStopMinutes, sb.AutoArchiveDays, sb.AutoDeleteDays = r.typ, r.stop, r.archive, r.del
	}
	if sb.AutoResume == nil {
		on := true
		sb.AutoResume = &on
	}
	sb.bootRAMMB = sb.RAMMB
	sb.periods = nil
	s.track(&sb, sb.CreatedAt.Time)
	s.sandboxes[sb.ID] = &sb
	s.files[sb.ID] = map[string]*fileNode{"/": {dir: true, modTime: sb.CreatedAt.Time}}
	return sb.ID
}

// Sandbox returns a copy of the stored sandbox.
func (s *Server) Sandbox(id string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return Sandbox{}, false
	}
	return *sb, true
}

// Creates returns how many sandboxes POST /v1/sandboxes made.
func (s *Server) Creates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates
}

// Requests returns every request so far as "METHOD /path?query".
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Execs returns every exec so far.
func (s *Server) Execs() []ExecCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.execs)
}

// LastUpload describes the last file upload.
func (s *Server) LastUpload() UploadInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastUpload
}

// File returns the content of a file in a sandbox.
func (s *Server) File(id, path string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.files[id][cleanPath(path)]
	if !ok || n.dir {
		return nil, false
	}
	return slices.Clone(n.data), true
}

// PutFile stores a file in a sandbox, creating parent directories.
func (s *Server) PutFile(id, path string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putFile(id, cleanPath(path), data)
}

func (s *Server) putFile(id, p string, data []byte) {
	fs := s.files[id]
	t := s.now()
	for d := parentDir(p); ; d = parentDir(d) {
		if _, ok := fs[d]; !ok {
			fs[d] = &fileNode{dir: true, modTime: t}
		}
		if d == "/" {
			break
		}
	}
	fs[p] = &fileNode{data: data, modTime: t}
}

// writeJSON answers with status and v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeErr answers with the contract's error shape, plus extra fields.
func writeErr(w http.ResponseWriter, status int, code, msg string, extra ...any) {
	body := map[string]any{"code": code, "error": msg}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	writeJSON(w, status, body)
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"openapi": "3.1.0"})
	})
	auth := func(admin bool, h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || (tok != Token && tok != AdminToken) {
				writeErr(w, 401, "unauthorized", "missing or unknown bearer token: set PT_TOKEN to a valid token")
				return
			}
			if admin && tok != AdminToken {
				writeErr(w, 403, "forbidden", "only the admin token may create organizations")
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("POST /v1/sandboxes", auth(false, s.createSandbox))
	mux.HandleFunc("GET /v1/sandboxes", auth(false, s.listSandboxes))
	mux.HandleFunc("GET /v1/sandboxes/{id}", auth(false, s.getSandbox))
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", auth(false, s.deleteSandbox))
	mux.HandleFunc("PATCH /v1/sandboxes/{id}", auth(false, s.patchSandbox))
	mux.HandleFunc("PATCH /v1/sandboxes/{id}/env", auth(false, s.patchEnv))
	mux.HandleFunc("GET /v1/sandboxes/{id}/children", auth(false, s.children))
	mux.HandleFunc("POST /v1/sandboxes/{id}/resize", auth(false, s.resize))
	mux.HandleFunc("GET /v1/sandboxes/{id}/metrics", auth(false, s.metrics))
	mux.HandleFunc("GET /v1/sandboxes/{id}/usage", auth(false, s.usage))
	mux.HandleFunc("POST /v1/sandboxes/{id}/stop", auth(false, s.lifecycle("stop")))
	mux.HandleFunc("POST /v1/sandboxes/{id}/pause", auth(false, s.lifecycle("stop")))
	mux.HandleFunc("POST /v1/sandboxes/{id}/start", auth(false, s.lifecycle("start")))
	mux.HandleFunc("POST /v1/sandboxes/{id}/resume", auth(false, s.lifecycle("start")))
	mux.HandleFunc("POST /v1/sandboxes/{id}/archive", auth(false, s.lifecycle("archive")))
	mux.HandleFunc("POST /v1/sandboxes/{id}/exec", auth(false, s.exec))
	mux.HandleFunc("GET /v1/sandboxes/{id}/files", auth(false, s.getFile))
	mux.HandleFunc("PUT /v1/sandboxes/{id}/files", auth(false, s.putFileHandler))
	mux.HandleFunc("DELETE /v1/sandboxes/{id}/files", auth(false, s.deleteFile))
	mux.HandleFunc("POST /v1/sandboxes/{id}/files/mkdir", auth(false, s.mkdir))
	mux.HandleFunc("GET /v1/templates", auth(false, s.listTemplates))
	mux.HandleFunc("GET /v1/templates/{slug}", auth(false, s.getTemplate))
	mux.HandleFunc("POST /v1/templates/{slug}/build", auth(false, s.buildTemplate))
	mux.HandleFunc("POST /v1/orgs", auth(true, s.createOrg))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, 404, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		line := r.Method + " " + r.URL.Path
		if r.URL.RawQuery != "" {
			line += "?" + r.URL.RawQuery
		}
		s.requests = append(s.requests, line)
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
}

// decodeStrict decodes a JSON body the way ptd does: unknown fields and
// wrong types are a 400 invalid_request.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, 400, "invalid_request", "bad JSON body: "+err.Error())
		return false
	}
	return true
}

type createBody struct {
	Template string            `json:"template"`
	CPU      *float64          `json:"cpu"`
	RAMMB    *int              `json:"ram_mb"`
	DiskGB   *int              `json:"disk_gb"`
	Name     *string           `json:"name"`
	Env      map[string]string `json:"env"`
	Metadata map[string]string `json:"metadata"`
	Wait     *bool             `json:"wait"`

	ParentID   *string `json:"parent_id"`
	AutoResume *bool   `json:"auto_resume"`

	Type            string `json:"type"`
	AutoStopMinutes *int   `json:"auto_stop_minutes"`
	AutoArchiveDays *int   `json:"auto_archive_days"`
	AutoDeleteDays  *int   `json:"auto_delete_days"`
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var b createBody
	if !decodeStrict(w, r, &b) {
		return
	}
	q := r.URL.Query()
	wait := b.Wait != nil && *b.Wait
	switch q.Get("wait_for_state") {
	case "":
	case "running":
		wait = true
	default:
		writeErr(w, 400, "invalid_request", "wait_for_state must be running", "field", "wait_for_state")
		return
	}
	if v := q.Get("wait_timeout_ms"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 600000 {
			writeErr(w, 400, "invalid_request", "wait_timeout_ms must be 1..600000", "field", "wait_timeout_ms")
			return
		}
	}
	if _, ok := b.Metadata["last_start"]; ok {
		// As ptd: last_start is the platform's key.
		writeErr(w, 400, "invalid_request", "metadata: key last_start is the platform's (the latest start, shown as metadata.last_start); use another key", "field", "metadata")
		return
	}
	sb := Sandbox{Template: b.Template, CPU: 1, RAMMB: 512, DiskGB: 2, Name: b.Name, Env: b.Env, Metadata: b.Metadata, AutoResume: b.AutoResume}
	if b.CPU != nil {
		sb.CPU = *b.CPU
	}
	if b.RAMMB != nil {
		sb.RAMMB = *b.RAMMB
	}
	if b.DiskGB != nil {
		sb.DiskGB = *b.DiskGB
	}
	switch {
	case b.Template == "":
		writeErr(w, 400, "invalid_request", "template is required, e.g. \"pt-base\"", "field", "template")
		return
	case sb.CPU <= 0 || sb.CPU > 64:
		writeErr(w, 400, "invalid_request", "cpu must be > 0 and <= 64", "field", "cpu")
		return
	case sb.RAMMB < 128:
		writeErr(w, 400, "invalid_request", "ram_mb must be >= 128", "field", "ram_mb")
		return
	case sb.DiskGB <= 0:
		writeErr(w, 400, "invalid_request", "disk_gb must be > 0", "field", "disk_gb")
		return
	}
	ret, ok := retention(b.Type)
	if !ok {
		writeErr(w, 400, "invalid_request", "type must be persistent, ephemeral or dev", "field", "type")
		return
	}
	sb.Type, sb.AutoStopMinutes, sb.AutoArchiveDays, sb.AutoDeleteDays = ret.typ, ret.stop, ret.archive, ret.del
	for _, o := range []struct {
		field string
		v     *int
		dst   *int
	}{{"auto_stop_minutes", b.AutoStopMinutes, &sb.AutoStopMinutes}, {"auto_archive_days", b.AutoArchiveDays, &sb.AutoArchiveDays}, {"auto_delete_days", b.AutoDeleteDays, &sb.AutoDeleteDays}} {
		if o.v == nil {
			continue
		}
		if *o.v < 0 || *o.v > 100000 {
			writeErr(w, 400, "invalid_request", o.field+" must be between 0 (disabled) and 100000", "field", o.field)
			return
		}
		*o.dst = *o.v
	}
	if code, msg := envTooLarge(b.Env); code != "" {
		writeEnvErr(w, code, msg)
		return
	}
	s.mu.Lock()
	if b.ParentID != nil && *b.ParentID != "" {
		parent, ok := s.sandboxes[*b.ParentID]
		if !ok || parent.State == "deleted" {
			s.mu.Unlock()
			writeErr(w, 404, "not_found", fmt.Sprintf("parent %q not found", *b.ParentID), "field", "parent_id")
			return
		}
		if parent.State != "running" {
			s.mu.Unlock()
			writeErr(w, 409, "conflict", fmt.Sprintf("the parent is %s; it must be running to create children", parent.State), "state", parent.State)
			return
		}
		sb.ParentID = b.ParentID
	}
	if b.Name != nil && s.nameTaken(*b.Name, "") {
		s.mu.Unlock()
		writeErr(w, 409, "conflict", fmt.Sprintf("name %q is taken by another live sandbox", *b.Name))
		return
	}
	t, ok := s.templates[b.Template]
	if !ok {
		s.mu.Unlock()
		writeErr(w, 404, "not_found", fmt.Sprintf("template %q not found: list templates with GET /v1/templates", b.Template), "field", "template")
		return
	}
	if t.Status == "not_built" || t.Status == "failed" {
		t.Status, t.Progress, t.Error, t.steps = "building", "", "", slices.Clone(s.BuildSteps)
	}
	sb.State = "creating"
	sb.pollsLeft = s.CreatePolls
	sb.HostID = "host_01KTEST"
	for k := range sb.Env {
		sb.EnvKeys = append(sb.EnvKeys, k)
	}
	slices.Sort(sb.EnvKeys)
	s.creates++
	s.mu.Unlock()
	id := s.AddSandbox(sb)

	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.sandboxes[id]
	if wait {
		s.advance(p)
		if p.State == "creating" {
			writeTimedOut(w, p)
			return
		}
	}
	writeJSON(w, 201, p)
}

// writeTimedOut is the 202 of a wait that ran out.
func writeTimedOut(w http.ResponseWriter, sb *Sandbox) {
	w.Header().Set("Retry-After", "5")
	writeJSON(w, 202, struct {
		*Sandbox
		WaitTimedOut bool `json:"wait_timed_out"`
	}{sb, true})
}

// advance moves a creating sandbox on: to failed or running once its polls
// are used up and its template is ready. Lifecycle transitions move on
// once their polls are used up. Callers hold mu.
func (s *Server) advance(sb *Sandbox) {
	if sb.pollsLeft > 0 {
		return
	}
	if sb.State != "creating" {
		s.advanceLifecycle(sb)
		return
	}
	t := s.templates[sb.Template]
	switch {
	case s.CreateFailReason != "":
		sb.State, sb.Reason = "failed", s.CreateFailReason
	case t != nil && t.Status == "failed":
		sb.State, sb.Reason = "failed", "template build failed: "+t.Error
	case t != nil && t.Status == "ready":
		sb.State = "running"
		sb.TemplateVersionID = *t.VersionID
	default:
		return
	}
	sb.UpdatedAt = Time{s.now()}
	s.track(sb, sb.UpdatedAt.Time)
}

var states = []string{"creating", "starting", "running", "stopping", "stopped", "archiving", "archived", "restoring", "deleting", "deleted", "failed"}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	if state != "" && !slices.Contains(states, state) {
		writeErr(w, 400, "invalid_request", "unknown state "+strconv.Quote(state), "field", "state")
		return
	}
	parent := q.Get("parent_id")
	if v := q.Get("roots_only"); v != "" {
		roots, err := strconv.ParseBool(v)
		if err != nil {
			writeErr(w, 400, "invalid_request", "roots_only must be true or false", "field", "roots_only")
			return
		}
		if roots {
			parent = "none"
		}
	}
	md := map[string]string{}
	for k, vs := range q {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") {
			md[strings.TrimSuffix(name, "]")] = vs[0]
		}
	}
	limit, offset := 50, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			writeErr(w, 400, "invalid_request", "limit must be 1..200", "field", "limit")
			return
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeErr(w, 400, "invalid_request", "offset must be >= 0", "field", "offset")
			return
		}
		offset = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []*Sandbox
	for _, sb := range s.sandboxes {
		if sb.State != "deleted" && (state == "" || sb.State == state) && inTree(sb, parent) && hasMetadata(sb, md) {
			rows = append(rows, sb)
		}
	}
	newestFirst(rows)
	total := len(rows)
	page := rows[min(offset, total):min(offset+limit, total)]
	if page == nil {
		page = []*Sandbox{}
	}
	out := map[string]any{"rows": page}
	if q.Get("paginated") == "true" {
		out["total"] = total
	}
	writeJSON(w, 200, out)
}

// lookup finds a live sandbox or answers 404. Callers hold mu.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, includeDeleted bool) *Sandbox {
	id := r.PathValue("id")
	sb, ok := s.sandboxes[id]
	if !ok || (sb.State == "deleted" && !includeDeleted) {
		writeErr(w, 404, "not_found", fmt.Sprintf("sandbox %s not found", id))
		return nil
	}
	return sb
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r, r.URL.Query().Get("include_deleted") == "true")
	if sb == nil {
		return
	}
	if sb.pollsLeft > 0 {
		sb.pollsLeft--
	}
	s.advance(sb)
	writeJSON(w, 200, sb)
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r, false)
	if sb == nil {
		return
	}
	if kids := s.liveChildren(sb.ID); len(kids) > 0 {
		writeErr(w, 409, "conflict", fmt.Sprintf("sandbox has %d live children; delete them first: %v", len(kids), kids), "children", kids)
		return
	}
	now := Time{s.now()}
	sb.Reason, sb.DeletedReason, sb.Restore, sb.RAMRestored = "user_deleted", "user_deleted", nil, nil
	answer := *sb
	answer.State, answer.UpdatedAt = "deleting", now
	// The fake tears down at once; the answer still says deleting.
	sb.State, sb.UpdatedAt, sb.DeletedAt = "deleted", now, &now
	s.track(sb, now.Time)
	writeJSON(w, 202, &answer)
}

// running finds a running sandbox or answers 404 / 409 sandbox_not_ready.
// Callers hold mu.
func (s *Server) running(w http.ResponseWriter, r *http.Request) *Sandbox {
	sb := s.lookup(w, r, false)
	if sb == nil {
		return nil
	}
	if sb.State != "running" {
		writeErr(w, 409, "sandbox_not_ready", fmt.Sprintf("sandbox %s is %s, not running", sb.ID, sb.State), "state", sb.State)
		return nil
	}
	return sb
}

type execBody struct {
	Cmd       json.RawMessage   `json:"cmd"`
	Env       map[string]string `json:"env"`
	Cwd       string            `json:"cwd"`
	TimeoutMS *int64            `json:"timeout_ms"`
	Stdin     string            `json:"stdin"`
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var b execBody
	if !decodeStrict(w, r, &b) {
		return
	}
	call := ExecCall{SandboxID: r.PathValue("id"), Env: b.Env, Cwd: b.Cwd, Stdin: b.Stdin}
	if json.Unmarshal(b.Cmd, &call.Argv) != nil || len(call.Argv) == 0 {
		call.Argv = nil
		if json.Unmarshal(b.Cmd, &call.Shell) != nil || call.Shell == "" {
			writeErr(w, 400, "invalid_request", "cmd must be a non-empty array of strings or a shell string", "field", "cmd")
			return
		}
	}
	if b.TimeoutMS != nil {
		if *b.TimeoutMS <= 0 {
			writeErr(w, 400, "invalid_request", "timeout_ms must be > 0", "field", "timeout_ms")
			return
		}
		call.TimeoutMS = *b.TimeoutMS
	}
	s.mu.Lock()
	sb := s.running(w, r)
	if sb == nil {
		s.mu.Unlock()
		return
	}
	if len(sb.Env) > 0 {
		call.SandboxEnv = maps.Clone(sb.Env)
	}
	s.execs = append(s.execs, call)
	run := s.Exec
	s.mu.Unlock()
	if run == nil {
		run = interpret
	}
	out := run(call)

	stream := r.URL.Query().Get("stream") == "true" || strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
	if !stream {
		if out.ErrorCode != "" {
			writeErr(w, 500, out.ErrorCode, out.ErrorMsg)
			return
		}
		var stdout, stderr strings.Builder
		for _, c := range out.Output {
			if c.Stream == "stderr" {
				stderr.WriteString(c.Data)
			} else {
				stdout.WriteString(c.Data)
			}
		}
		writeJSON(w, 200, map[string]any{
			"exit_code": out.ExitCode, "stdout": stdout.String(), "stderr": stderr.String(),
			"timed_out": out.TimedOut, "duration_ms": 7,
		})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(200)
	enc := json.NewEncoder(w)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	_ = enc.Encode(map[string]any{"type": "start", "pid": 42})
	flush()
	for _, c := range out.Output {
		_ = enc.Encode(map[string]any{"type": c.Stream, "data": c.Data})
		flush()
	}
	if out.ErrorCode != "" {
		_ = enc.Encode(map[string]any{"type": "error", "code": out.ErrorCode, "error": out.ErrorMsg})
		return
	}
	_ = enc.Encode(map[string]any{"type": "exit", "exit_code": out.ExitCode, "timed_out": out.TimedOut})
}

// interpret is the default Exec: just enough of a shell for tests.
func interpret(c ExecCall) ExecOutcome {
	argv := c.Argv
	if c.Shell != "" {
		argv = strings.Fields(c.Shell)
	}
	if len(argv) >= 3 && argv[0] == "sh" && argv[1] == "-c" {
		argv = strings.Fields(argv[2])
	}
	out := func(s string) ExecOutcome { return ExecOutcome{Output: []Chunk{{"stdout", s}}} }
	switch {
	case len(argv) == 0:
		return ExecOutcome{ExitCode: 0}
	case argv[0] == "echo":
		return out(strings.Join(argv[1:], " ") + "\n")
	case argv[0] == "cat":
		return out(c.Stdin)
	case argv[0] == "pwd":
		return out(cmp.Or(c.Cwd, "/") + "\n")
	case argv[0] == "printenv" && len(argv) == 2:
		v, ok := c.Env[argv[1]]
		if !ok {
			v, ok = c.SandboxEnv[argv[1]]
		}
		if !ok {
			return ExecOutcome{ExitCode: 1}
		}
		return out(v + "\n")
	case argv[0] == "true":
		return ExecOutcome{}
	case argv[0] == "false":
		return ExecOutcome{ExitCode: 1}
	case argv[0] == "exit" && len(argv) == 2:
		n, _ := strconv.Atoi(argv[1])
		return ExecOutcome{ExitCode: n}
	}
	return ExecOutcome{Output: []Chunk{{"stderr", "sh: " + argv[0] + ": not found\n"}}, ExitCode: 127}
}

func cleanPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if len(p) > 1 {
		p = strings.TrimRight(p, "/")
	}
	return p
}

func parentDir(p string) string {
	i := strings.LastIndex(p, "/")
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// filePath validates ?path= (required, no ".." element) or answers 400.
func filePath(w http.ResponseWriter, raw string) (string, bool) {
	if raw == "" {
		writeErr(w, 400, "invalid_request", "path is required", "field", "path")
		return "", false
	}
	if slices.Contains(strings.Split(raw, "/"), "..") {
		writeErr(w, 400, "invalid_request", "path must not contain a .. element", "field", "path")
		return "", false
	}
	return cleanPath(raw), true
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	p, ok := filePath(w, r.URL.Query().Get("path"))
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.running(w, r)
	if sb == nil {
		return
	}
	fs := s.files[sb.ID]
	n, ok := fs[p]
	if !ok {
		writeErr(w, 404, "not_found", "no such file or directory: "+p)
		return
	}
	if !n.dir {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(n.data)))
		_, _ = w.Write(n.data)
		return
	}
	type entry struct {
		Name       string `json:"name"`
		Path       string `json:"path"`
		Type       string `json:"type"`
		Size       int64  `json:"size"`
		Mode       string `json:"mode"`
		ModifiedAt Time   `json:"modified_at"`
	}
	entries := []entry{}
	for fp, fn := range fs {
		if fp == p || fp == "/" || parentDir(fp) != p {
			continue
		}
		e := entry{Name: fp[strings.LastIndex(fp, "/")+1:], Path: fp, Type: "file", Size: int64(len(fn.data)), Mode: "-rw-r--r--", ModifiedAt: Time{fn.modTime}}
		if fn.dir {
			e.Type, e.Size, e.Mode = "dir", 4096, "drwxr-xr-x"
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, 200, map[string]any{"entries": entries})
}

func (s *Server) putFileHandler(w http.ResponseWriter, r *http.Request) {
	p, ok := filePath(w, r.URL.Query().Get("path"))
	if !ok {
		return
	}
	s.mu.Lock()
	sb := s.running(w, r)
	hook := s.OnUploadRead
	s.mu.Unlock()
	if sb == nil {
		return
	}
	var data []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Body.Read(buf)
		data = append(data, buf[:n]...)
		if n > 0 && hook != nil {
			hook(int64(len(data)))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				writeErr(w, 400, "invalid_request", "reading body: "+err.Error())
				return
			}
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.files[sb.ID][p]; ok && n.dir {
		writeErr(w, 409, "conflict", p+" is a directory")
		return
	}
	s.putFile(sb.ID, p, data)
	s.lastUpload = UploadInfo{Path: p, ContentLength: r.ContentLength, TransferEncoding: r.TransferEncoding, Size: int64(len(data))}
	writeJSON(w, 200, map[string]any{"path": p, "size": len(data)})
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	p, ok := filePath(w, r.URL.Query().Get("path"))
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.running(w, r)
	if sb == nil {
		return
	}
	fs := s.files[sb.ID]
	if _, ok := fs[p]; !ok || p == "/" {
		writeErr(w, 404, "not_found", "no such file or directory: "+p)
		return
	}
	for fp := range fs {
		if fp == p || strings.HasPrefix(fp, p+"/") {
			delete(fs, fp)
		}
	}
	w.WriteHeader(204)
}

func (s *Server) mkdir(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Path string `json:"path"`
	}
	if !decodeStrict(w, r, &b) {
		return
	}
	p, ok := filePath(w, b.Path)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.running(w, r)
	if sb == nil {
		return
	}
	fs := s.files[sb.ID]
	if n, ok := fs[p]; ok {
		if !n.dir {
			writeErr(w, 409, "conflict", p+" exists and is a file")
			return
		}
		writeJSON(w, 200, map[string]any{"path": p, "created": false})
		return
	}
	t := s.now()
	for d := p; ; d = parentDir(d) {
		if _, ok := fs[d]; !ok {
			fs[d] = &fileNode{dir: true, modTime: t}
		}
		if d == "/" {
			break
		}
	}
	writeJSON(w, 200, map[string]any{"path": p, "created": true})
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows := []*Template{}
	for _, t := range s.templates {
		rows = append(rows, t)
	}
	slices.SortFunc(rows, func(a, b *Template) int { return cmp.Compare(a.Slug, b.Slug) })
	writeJSON(w, 200, map[string]any{"rows": rows})
}

// step moves a building template one progress line on. Callers hold mu.
func (s *Server) step(t *Template) {
	if t.Status != "building" {
		return
	}
	if len(t.steps) == 0 {
		v := s.nextID("tplv")
		t.Status, t.Progress, t.VersionID, t.SizeBytes, t.CreatedAt = "ready", "", &v, 200<<20, Time{s.now()}
		return
	}
	t.Progress, t.steps = t.steps[0], t.steps[1:]
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[r.PathValue("slug")]
	if !ok {
		writeErr(w, 404, "not_found", fmt.Sprintf("template %q not found", r.PathValue("slug")))
		return
	}
	s.step(t)
	writeJSON(w, 200, t)
}

func (s *Server) buildTemplate(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[r.PathValue("slug")]
	if !ok {
		writeErr(w, 404, "not_found", fmt.Sprintf("template %q not found", r.PathValue("slug")))
		return
	}
	t.Status, t.Progress, t.Error, t.steps = "building", "", "", slices.Clone(s.BuildSteps)
	writeJSON(w, 202, t)
}

func (s *Server) createOrg(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Name string `json:"name"`
	}
	if !decodeStrict(w, r, &b) {
		return
	}
	if b.Name == "" {
		writeErr(w, 400, "invalid_request", "name is required", "field", "name")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	org := map[string]any{"id": s.nextID("org"), "name": b.Name, "created_at": Time{s.now()}}
	writeJSON(w, 201, map[string]any{"org": org, "token": "pt_" + strings.Repeat("x", 8) + strconv.Itoa(s.seq)})
}
