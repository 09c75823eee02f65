package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Upload purposes: a Dockerfile's build context or an image tarball.
const (
	uploadContext = "context"
	uploadImage   = "image"
)

// TemplateUpload is an uploaded build context or image tarball, kept in
// the object store for TemplateBuildConfig.UploadTTL.
type TemplateUpload struct {
	ID        string
	Purpose   string
	SizeBytes int64
	SHA256    string
}

func uploadKey(org, purpose, id string) string { return purpose + "/" + org + "/" + id }

// errUploadTooLarge stops a Put past the limit.
var errUploadTooLarge = errors.New("upload too large")

// limitedHash counts and hashes a stream, failing past max bytes.
type limitedHash struct {
	r   io.Reader
	n   int64
	max int64
	h   interface {
		io.Writer
		Sum([]byte) []byte
	}
}

func (l *limitedHash) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	l.h.Write(p[:n])
	if l.n > l.max {
		return n, errUploadTooLarge
	}
	return n, err
}

// UploadTemplateFile stores a streamed build context (purpose "context")
// or image tarball ("image") for a later POST /v1/templates. size is the
// announced length (-1 when unknown). Past the purpose's limit nothing is
// stored and the error is a TemplateError upload_too_large (413).
func (s *Service) UploadTemplateFile(ctx context.Context, p Principal, purpose string, r io.Reader, size int64) (TemplateUpload, error) {
	if p.SandboxID != "" {
		return TemplateUpload{}, fmt.Errorf("a sandbox's token cannot build templates: %w", sandbox.ErrForbidden)
	}
	cfg := s.cfg.TemplateBuilds
	var max int64
	switch purpose {
	case uploadContext:
		max = cfg.ContextMaxBytes
	case uploadImage:
		max = cfg.ImageMaxBytes
	default:
		return TemplateUpload{}, &sandbox.FieldError{Field: "purpose", Reason: "must be context or image"}
	}
	tooLarge := &TemplateError{Code: "upload_too_large", MaxBytes: max,
		Err: fmt.Errorf("the %s upload is larger than this server's limit of %d bytes: %w", purpose, max, sandbox.ErrInvalidArgument)}
	if size > max {
		return TemplateUpload{}, tooLarge
	}
	if s.cfg.Objects == nil {
		return TemplateUpload{}, fmt.Errorf("template uploads need an object store: %w", sandbox.ErrUnavailable)
	}
	if err := s.cfg.Objects.EnsureBucket(ctx, cfg.UploadBucket); err != nil {
		return TemplateUpload{}, err
	}
	up := TemplateUpload{ID: sandbox.NewID(sandbox.PrefixTemplateUpload), Purpose: purpose}
	lh := &limitedHash{r: r, max: max, h: sha256.New()}
	if err := s.cfg.Objects.Put(ctx, cfg.UploadBucket, uploadKey(p.OrgID, purpose, up.ID), lh, objstore.SizeUnknown); err != nil {
		if errors.Is(err, errUploadTooLarge) || lh.n > max {
			return TemplateUpload{}, tooLarge
		}
		return TemplateUpload{}, err
	}
	up.SizeBytes, up.SHA256 = lh.n, hex.EncodeToString(lh.h.Sum(nil))
	s.log.InfoContext(ctx, "template upload stored", "upload", up.ID, "purpose", purpose, "bytes", up.SizeBytes)
	return up, nil
}

// checkUpload makes sure an upload of the org exists for that purpose.
func (s *Service) checkUpload(ctx context.Context, org, purpose, id, field string) error {
	notFound := fmt.Errorf("upload %q: %w", id, &sandbox.NotFoundFieldError{Name: field})
	if !sandbox.ValidID(sandbox.PrefixTemplateUpload, id) || s.cfg.Objects == nil {
		return notFound
	}
	if _, err := s.cfg.Objects.Stat(ctx, s.cfg.TemplateBuilds.UploadBucket, uploadKey(org, purpose, id)); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return notFound
		}
		return err
	}
	return nil
}

// spoolUpload copies an upload to a local temporary file (the builder
// needs random access) and returns its path.
func (s *Service) spoolUpload(ctx context.Context, org, purpose, id string) (string, error) {
	rc, err := s.cfg.Objects.Get(ctx, s.cfg.TemplateBuilds.UploadBucket, uploadKey(org, purpose, id))
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", id, err)
	}
	defer rc.Close()
	f, err := os.CreateTemp("", "pt-build-context-*.tar")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("upload %s: %w", id, err)
	}
	return f.Name(), nil
}

// importUpload imports an uploaded image tarball on the host.
func (s *Service) importUpload(ctx context.Context, tp hostapi.Templater, pb *pendingBuild, progress func(hostapi.ImageEvent)) (hostapi.ImageInfo, error) {
	rc, err := s.cfg.Objects.Get(ctx, s.cfg.TemplateBuilds.UploadBucket, uploadKey(pb.rec.OrgID, uploadImage, pb.req.ImageUploadID))
	if err != nil {
		return hostapi.ImageInfo{}, fmt.Errorf("upload %s: %w", pb.req.ImageUploadID, err)
	}
	defer rc.Close()
	return tp.ImportImage(ctx, rc, progress)
}

// sweepUploads removes uploads older than UploadTTL.
func (s *Service) sweepUploads(ctx context.Context) {
	if s.cfg.Objects == nil {
		return
	}
	cutoff := time.Now().Add(-s.cfg.TemplateBuilds.UploadTTL)
	for _, purpose := range []string{uploadContext, uploadImage} {
		for info, err := range s.cfg.Objects.List(ctx, s.cfg.TemplateBuilds.UploadBucket, purpose+"/") {
			if err != nil {
				if !errors.Is(err, objstore.ErrNotFound) {
					s.log.WarnContext(ctx, "sweep template uploads", "err", err)
				}
				break
			}
			if info.ModTime.Before(cutoff) && strings.Count(info.Key, "/") == 2 {
				s.cfg.Objects.Delete(ctx, s.cfg.TemplateBuilds.UploadBucket, info.Key)
			}
		}
	}
}
