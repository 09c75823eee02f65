package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/image"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

var _ hostapi.Templater = (*Host)(nil)

// ImageConfig configures the host's layer store (internal/image).
type ImageConfig struct {
	// AllowPrivate lets pulls reach registries on loopback and private
	// addresses (tests, closed networks).
	AllowPrivate bool
	// MaxBytes caps one image's unpacked size (0: the package default).
	MaxBytes int64
}

func (h *Host) openImages() error {
	s, err := image.Open(image.Config{Root: filepath.Join(h.cfg.DataDir, "layers"), AllowPrivate: h.cfg.Images.AllowPrivate,
		MaxBytes: h.cfg.Images.MaxBytes}, h.log)
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	h.img = s
	return nil
}

// imageErr gives an image error its stable code.
func imageErr(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range []struct {
		kind error
		code string
	}{
		{image.ErrNotFound, "image_not_found"}, {image.ErrUnauthorized, "image_unauthorized"},
		{image.ErrDigest, "image_digest_mismatch"}, {image.ErrUnsafe, "image_layer_unsafe"},
		{image.ErrTooLarge, "image_too_large"}, {image.ErrInvalid, "image_invalid"},
		{image.ErrRegistry, "registry_unavailable"},
	} {
		if errors.Is(err, k.kind) {
			return &hostapi.ImageError{Code: k.code, Err: err}
		}
	}
	return err
}

func authOf(a hostapi.RegistryAuth) image.Auth {
	return image.Auth{Username: a.Username, Password: a.Password, Token: a.Token}
}

func progressOf(p func(hostapi.ImageEvent)) image.Progress {
	if p == nil {
		return nil
	}
	return func(e image.Event) {
		p(hostapi.ImageEvent{Layer: e.Layer, Bytes: e.Bytes, Total: e.Total, Cached: e.Cached, Done: e.Done, Message: e.Message})
	}
}

func infoOf(img image.Image) hostapi.ImageInfo {
	s := img.Settings
	return hostapi.ImageInfo{Digest: img.Digest, Layers: img.Layers, Size: img.Size, Env: s.Env, User: s.User,
		WorkingDir: s.WorkingDir, Entrypoint: s.Entrypoint, Cmd: s.Cmd, Labels: s.Labels, ExposedPorts: s.ExposedPorts}
}

// ResolveImage implements hostapi.Templater.
func (h *Host) ResolveImage(ctx context.Context, ref string, auth hostapi.RegistryAuth) (hostapi.ImageInfo, error) {
	img, err := h.img.Resolve(ctx, ref, authOf(auth))
	if err != nil {
		return hostapi.ImageInfo{}, imageErr(err)
	}
	return infoOf(img), nil
}

// PullImage implements hostapi.Templater.
func (h *Host) PullImage(ctx context.Context, ref string, auth hostapi.RegistryAuth, progress func(hostapi.ImageEvent)) (hostapi.ImageInfo, error) {
	img, err := h.img.Pull(ctx, ref, authOf(auth), progressOf(progress))
	if err != nil {
		return hostapi.ImageInfo{}, imageErr(err)
	}
	return infoOf(img), nil
}

// ImportImage implements hostapi.Templater.
func (h *Host) ImportImage(ctx context.Context, r io.Reader, progress func(hostapi.ImageEvent)) (hostapi.ImageInfo, error) {
	img, err := h.img.Import(ctx, r, progressOf(progress))
	if err != nil {
		return hostapi.ImageInfo{}, imageErr(err)
	}
	return infoOf(img), nil
}

// templateDir is where a version's files live.
func (h *Host) templateDir(versionID string) (string, error) {
	if !sandbox.ValidID(sandbox.PrefixTemplateVersion, versionID) {
		return "", fmt.Errorf("host: bad template version %q: %w", versionID, sandbox.ErrInvalidArgument)
	}
	return filepath.Join(h.cfg.DataDir, "templates", versionID), nil
}

// MakeTemplate implements hostapi.Templater.
func (h *Host) MakeTemplate(ctx context.Context, versionID, base string, layers []string) (string, int64, error) {
	dir, err := h.templateDir(versionID)
	if err != nil {
		return "", 0, err
	}
	removeTreeAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, fmt.Errorf("host: template: %w", err)
	}
	dest := filepath.Join(dir, "rootfs")
	if err := h.img.Flatten(ctx, dest, base, layers); err != nil {
		removeTreeAll(dir)
		return "", 0, imageErr(err)
	}
	return dest, image.Size(dest), nil
}

// captureExclude is what the host, not the build, put on a build
// sandbox's disk: the agent's mount point, the identity files
// seedIdentity writes, the environment file and the egress CA bundle.
var captureExclude = []string{".pt", "etc/hostname", "etc/hosts", "etc/resolv.conf", "etc/pt-env",
	"etc/machine-id", "etc/ssl/certs/platinum-egress-ca.pem"}

// CaptureDiff implements hostapi.Templater. The snapshot's image is
// cloned (a reflink) and the clone mounted, so the cached snapshot itself
// is never mounted or changed.
func (h *Host) CaptureDiff(ctx context.Context, snapID string) (string, error) {
	if !sandbox.ValidID(sandbox.PrefixSnapshot, snapID) {
		return "", fmt.Errorf("host: bad snapshot id %q: %w", snapID, sandbox.ErrInvalidArgument)
	}
	tmp := "capture-" + snapID
	mnt := filepath.Join(h.cfg.DataDir, "runtime", tmp)
	defer func() {
		cctx := context.WithoutCancel(ctx)
		h.pool.UnmountImage(cctx, mnt)
		os.Remove(mnt)
		h.pool.RemoveImage(cctx, tmp)
	}()
	h.pool.UnmountImage(ctx, mnt) // a crash's leftovers
	h.pool.RemoveImage(ctx, tmp)
	if err := h.pool.CloneImage(ctx, snapID, tmp); err != nil {
		return "", fmt.Errorf("host: capture %s: %w", snapID, err)
	}
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		return "", fmt.Errorf("host: capture %s: %w", snapID, err)
	}
	if err := h.pool.MountImage(ctx, tmp, mnt); err != nil {
		return "", fmt.Errorf("host: capture %s: %w", snapID, err)
	}
	upper := filepath.Join(mnt, "upper")
	if _, err := os.Stat(upper); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(upper, 0o755); err != nil {
			return "", fmt.Errorf("host: capture %s: %w", snapID, err)
		}
	}
	id, err := h.img.ImportDir(ctx, upper, captureExclude)
	if err != nil {
		return "", imageErr(err)
	}
	return id, nil
}

// RemoveTemplate implements hostapi.Templater.
func (h *Host) RemoveTemplate(ctx context.Context, versionID string) error {
	dir, err := h.templateDir(versionID)
	if err != nil {
		return err
	}
	removeTreeAll(dir)
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("host: template %s: could not remove %s", versionID, dir)
	}
	return nil
}

// PruneLayers implements hostapi.Templater.
func (h *Host) PruneLayers(ctx context.Context, keep map[string]bool) error {
	layers, err := h.img.Layers()
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range layers {
		if !keep[l] {
			errs = append(errs, h.img.Remove(l))
		}
	}
	return errors.Join(errs...)
}

// removeTreeAll removes a template's directory; a version's rootfs is
// never a mount point, so a plain recursive removal (which never follows
// symlinks) is enough.
func removeTreeAll(dir string) { os.RemoveAll(dir) }

var _ hostapi.TemplateCopies = (*Host)(nil)

// TemplatePath implements hostapi.TemplateCopies: the path BuildTemplate
// and MakeTemplate write, <data-dir>/templates/<version>/rootfs.
func (h *Host) TemplatePath(versionID string) (string, bool, error) {
	dir, err := h.templateDir(versionID)
	if err != nil {
		return "", false, err
	}
	rootfs := filepath.Join(dir, "rootfs")
	fi, err := os.Stat(rootfs)
	return rootfs, err == nil && fi.IsDir(), nil
}

// ExportTemplate implements hostapi.TemplateCopies.
func (h *Host) ExportTemplate(ctx context.Context, rootfs string, w io.Writer) error {
	return image.WriteTree(ctx, rootfs, w)
}

// ImportTemplate implements hostapi.TemplateCopies.
func (h *Host) ImportTemplate(ctx context.Context, versionID string, r io.Reader) (string, int64, error) {
	dir, err := h.templateDir(versionID)
	if err != nil {
		return "", 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, fmt.Errorf("host: template: %w", err)
	}
	dest := filepath.Join(dir, "rootfs")
	removeTreeAll(dest)
	if err := image.UnpackTree(ctx, r, dest); err != nil {
		return "", 0, fmt.Errorf("host: template %s: %w", versionID, err)
	}
	return dest, image.Size(dest), nil
}

// TemplateDirs implements hostapi.TemplateCopies.
func (h *Host) TemplateDirs() ([]hostapi.TemplateDir, error) {
	entries, err := os.ReadDir(filepath.Join(h.cfg.DataDir, "templates"))
	if err != nil {
		return nil, fmt.Errorf("host: templates: %w", err)
	}
	var out []hostapi.TemplateDir
	for _, e := range entries {
		if !e.IsDir() || !sandbox.ValidID(sandbox.PrefixTemplateVersion, e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, hostapi.TemplateDir{VersionID: e.Name(), ModTime: fi.ModTime()})
	}
	return out, nil
}
