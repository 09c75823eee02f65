// Package artifacts exports files and directories out of running
// sandboxes into the object store, where they belong to the org and
// outlive the sandbox, and serves them back (docs/exec-and-files.md). It
// asks the control plane's core only for a running sandbox's agent.
package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/crashpoint"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// Prefix starts every artifact ID.
const Prefix = "art_"

// EventCreated is the event type written when an artifact is
// stored; its data names the artifact (artifact_id, name, path, kind,
// size_bytes).
const EventCreated = "artifact_created"

// Config says where artifacts go.
type Config struct {
	// Objects is the object store; nil refuses artifacts (unavailable).
	Objects objstore.Store
	// Bucket is the bucket artifacts are written to.
	Bucket string
	// MaxBytes caps one artifact (0: no cap); a larger export stores
	// nothing and fails with TooLargeError.
	MaxBytes int64
}

// DefaultConfig returns the production defaults (no object store yet: the
// caller sets Objects).
func DefaultConfig() Config {
	return Config{Bucket: "platinum-artifacts", MaxBytes: 5 << 30}
}

// Sandboxes is what artifacts needs of the core: a running sandbox the
// principal may reach, and the client of its agent (controlplane.Service).
type Sandboxes interface {
	RunningAgent(ctx context.Context, p tenancy.Principal, id string) (sandbox.Sandbox, *agentclient.Client, error)
}

// Service is the artifacts part of the control plane. Create it with New;
// Close waits for its start-up sweep.
type Service struct {
	cfg   Config
	store store.Store
	sbx   Sandboxes
	log   *slog.Logger
	wg    sync.WaitGroup
}

// New returns the service over st, exporting from the sandboxes sbx runs.
func New(cfg Config, st store.Store, sbx Sandboxes, logger *slog.Logger) *Service {
	return &Service{cfg: cfg, store: st, sbx: sbx, log: logger}
}

// Close waits for the start-up sweep (Sweep) to end.
func (s *Service) Close() { s.wg.Wait() }

// Request exports Path of a running sandbox; Name is the download
// file name (default: the path's base name, plus ".tar" for a directory).
type Request struct {
	Path string
	Name string
}

// Artifact is an exported file or directory.
type Artifact = store.Artifact

const maxArtifactName = 255

func validArtifactName(n string) bool {
	return n != "" && len(n) <= maxArtifactName && utf8.ValidString(n) && !strings.ContainsAny(n, "/\\\x00\r\n") &&
		n != "." && n != ".."
}

// Create copies a file (as is) or a directory (as a tar) out of a
// running sandbox into the object store. The artifact belongs to the org,
// not the sandbox: it survives the sandbox's stop, kill and deletion. It
// answers when the copy is stored whole; a failed copy stores nothing.
func (s *Service) Create(ctx context.Context, p tenancy.Principal, sandboxID string, r Request) (Artifact, error) {
	if err := tenancy.RequireOrgToken(p, "artifacts"); err != nil {
		return Artifact{}, err
	}
	if r.Path == "" || len(r.Path) > 4096 || strings.ContainsRune(r.Path, 0) {
		return Artifact{}, &sandbox.FieldError{Field: "path", Reason: "must be a path in the sandbox (1 to 4096 bytes)"}
	}
	for _, el := range strings.Split(r.Path, "/") {
		if el == ".." {
			return Artifact{}, &sandbox.FieldError{Field: "path", Reason: "must not contain '..' elements"}
		}
	}
	if r.Name != "" && !validArtifactName(r.Name) {
		return Artifact{}, &sandbox.FieldError{Field: "name", Reason: fmt.Sprintf("must be a file name of 1 to %d characters without '/'", maxArtifactName)}
	}
	if s.cfg.Objects == nil {
		return Artifact{}, fmt.Errorf("artifacts need an object store, and this server has none: %w", sandbox.ErrUnavailable)
	}
	sb, ag, err := s.sbx.RunningAgent(ctx, p, sandboxID)
	if err != nil {
		return Artifact{}, err
	}
	rc, isDir, err := ag.Artifact(ctx, r.Path)
	if err != nil {
		return Artifact{}, err
	}
	defer rc.Close()

	a := Artifact{ID: sandbox.NewID(Prefix), OrgID: sb.OrgID, SandboxID: sb.ID, Path: r.Path,
		Kind: store.ArtifactFile, Bucket: s.cfg.Bucket}
	a.Key = "artifacts/" + sb.OrgID + "/" + a.ID
	base := path.Base(path.Clean("/" + r.Path))
	if base == "/" || base == "." {
		base = "root"
	}
	a.Name = r.Name
	if isDir {
		a.Kind, a.ContentType = store.ArtifactDirectory, "application/x-tar"
		if a.Name == "" {
			a.Name = base + ".tar"
		}
	} else {
		if a.Name == "" {
			a.Name = base
		}
		a.ContentType = mime.TypeByExtension(path.Ext(a.Name))
		if a.ContentType == "" {
			a.ContentType = "application/octet-stream"
		}
	}
	if err := s.cfg.Objects.EnsureBucket(ctx, a.Bucket); err != nil {
		return Artifact{}, fmt.Errorf("artifact bucket: %w", err)
	}
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(rc, h), max: s.cfg.MaxBytes}
	if err := s.cfg.Objects.Put(ctx, a.Bucket, a.Key, cr, -1); err != nil {
		if cr.tooLarge {
			return Artifact{}, &TooLargeError{Max: cr.max}
		}
		return Artifact{}, fmt.Errorf("store artifact: %w", err)
	}
	crashpoint.Hit("artifact.stored")
	a.SizeBytes, a.SHA256 = cr.n, hex.EncodeToString(h.Sum(nil))
	out, err := s.store.CreateArtifact(ctx, a)
	if err != nil {
		if derr := s.cfg.Objects.Delete(context.WithoutCancel(ctx), a.Bucket, a.Key); derr != nil {
			s.log.WarnContext(ctx, "artifact: remove orphan object", "artifact", a.ID, "err", derr)
		}
		return Artifact{}, err
	}
	if err := s.store.AddEvent(ctx, sb.OrgID, sb.ID, EventCreated, map[string]any{"artifact_id": a.ID, "name": a.Name, "path": a.Path,
		"kind": a.Kind, "size_bytes": a.SizeBytes}); err != nil {
		s.log.WarnContext(ctx, "event", "sandbox", sb.ID, "type", EventCreated, "err", err)
	}
	s.log.InfoContext(ctx, "artifact created", "artifact", a.ID, "sandbox", sb.ID, "kind", a.Kind, "bytes", a.SizeBytes)
	return out, nil
}

// TooLargeError is an export past Config.MaxBytes: nothing
// is stored.
type TooLargeError struct{ Max int64 }

// Error implements error.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the artifact is larger than this server's limit of %d bytes; export a smaller file or directory", e.Max)
}

// countingReader counts what it reads and fails once past max (> 0).
type countingReader struct {
	r        io.Reader
	n, max   int64
	tooLarge bool
	crashed  bool
}

var errArtifactTooLarge = errors.New("artifact too large")

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if c.max > 0 && c.n > c.max {
		c.tooLarge = true
		return 0, errArtifactTooLarge
	}
	if !c.crashed && c.n >= 1<<20 {
		c.crashed = true
		crashpoint.Hit("artifact.streaming") // a MiB in: the object is half written
	}
	return n, err
}

// Sweep removes, in the background, what a crash left of exports: objects
// in the artifact bucket without a record (stored whole, but the record
// was never written). Only objects older than startedAt (this process's
// start) are considered, so an export in flight is never touched. Close
// waits for it.
func (s *Service) Sweep(ctx context.Context, startedAt time.Time) {
	s.wg.Go(func() { s.sweep(ctx, startedAt) })
}

func (s *Service) sweep(ctx context.Context, startedAt time.Time) {
	if s.cfg.Objects == nil || s.cfg.Bucket == "" {
		return
	}
	n := 0
	for info, err := range s.cfg.Objects.List(ctx, s.cfg.Bucket, "artifacts/") {
		if err != nil {
			if !errors.Is(err, objstore.ErrNotFound) {
				s.log.WarnContext(ctx, "artifacts: sweep", "err", err)
			}
			return
		}
		if !info.ModTime.Before(startedAt) {
			continue
		}
		parts := strings.Split(info.Key, "/") // artifacts/<org>/<id>
		if len(parts) != 3 || !sandbox.ValidID(Prefix, parts[2]) {
			continue
		}
		if _, err := s.store.GetArtifact(ctx, parts[1], parts[2]); !store.IsNotFound(err) {
			continue
		}
		if err := s.cfg.Objects.Delete(ctx, s.cfg.Bucket, info.Key); err != nil {
			s.log.WarnContext(ctx, "artifacts: remove orphan object", "key", info.Key, "err", err)
			continue
		}
		n++
	}
	if n > 0 {
		s.log.InfoContext(ctx, "artifacts: removed objects of exports a crash interrupted", "count", n)
	}
}

// List lists the org's artifacts, newest first; sandboxID keeps
// only one sandbox's (deleted sandboxes' too).
func (s *Service) List(ctx context.Context, p tenancy.Principal, sandboxID string) ([]Artifact, error) {
	if err := tenancy.RequireOrgToken(p, "artifacts"); err != nil {
		return nil, err
	}
	return s.store.ListArtifacts(ctx, p.OrgID, sandboxID)
}

// Get returns one artifact of the caller's org.
func (s *Service) Get(ctx context.Context, p tenancy.Principal, id string) (Artifact, error) {
	if err := tenancy.RequireOrgToken(p, "artifacts"); err != nil {
		return Artifact{}, err
	}
	if !sandbox.ValidID(Prefix, id) {
		return Artifact{}, fmt.Errorf("artifact %q: %w", id, sandbox.ErrNotFound)
	}
	return s.store.GetArtifact(ctx, p.OrgID, id)
}

// Open returns an artifact and its content; the caller closes it.
func (s *Service) Open(ctx context.Context, p tenancy.Principal, id string) (Artifact, io.ReadCloser, error) {
	a, err := s.Get(ctx, p, id)
	if err != nil {
		return Artifact{}, nil, err
	}
	if s.cfg.Objects == nil {
		return Artifact{}, nil, fmt.Errorf("artifacts need an object store, and this server has none: %w", sandbox.ErrUnavailable)
	}
	rc, err := s.cfg.Objects.Get(ctx, a.Bucket, a.Key)
	if err != nil {
		return Artifact{}, nil, fmt.Errorf("artifact %q content: %w", id, err)
	}
	return a, rc, nil
}

// Delete removes an artifact's record, then its object. A failure
// to delete the object is logged: the record is gone either way, so the
// artifact is gone for callers.
func (s *Service) Delete(ctx context.Context, p tenancy.Principal, id string) error {
	if err := tenancy.RequireOrgToken(p, "artifacts"); err != nil {
		return err
	}
	if !sandbox.ValidID(Prefix, id) {
		return fmt.Errorf("artifact %q: %w", id, sandbox.ErrNotFound)
	}
	a, err := s.store.DeleteArtifact(ctx, p.OrgID, id)
	if err != nil {
		return err
	}
	if s.cfg.Objects != nil {
		if err := s.cfg.Objects.Delete(context.WithoutCancel(ctx), a.Bucket, a.Key); err != nil {
			s.log.WarnContext(ctx, "artifact: delete object", "artifact", id, "key", a.Key, "err", err)
		}
	}
	return nil
}
