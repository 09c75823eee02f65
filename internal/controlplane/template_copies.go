package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/archive"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Every host boots every ready template version (docs/ARCHITECTURE.md,
// "Template versions on every host"). A version's record keeps the rootfs
// path of the host that built it, which is no use on another machine; a
// host boots its own copy, <its data dir>/templates/<version>/rootfs,
// made once on first use: a custom version is unpacked from the copy its
// build wrote to the object store, a platform version is built from its
// recipe (the machine-wide template cache makes that an extraction).

// templateArchiveID names the archive of a custom version's rootfs in the
// archive bucket (manifest manifests/<version>.json).
func templateArchiveID(versionID string) string { return versionID }

// copyFlight is one materialisation of a version on this host, which
// concurrent boots of the version wait for.
type copyFlight struct {
	done    chan struct{}
	waiters int // boots waiting for it (under templateCopies.mu)
	rootfs  string
	err     error
}

// templateCopies runs materialisations one per version at a time.
type templateCopies struct {
	mu      sync.Mutex
	flights map[string]*copyFlight
}

// waiting returns how many boots wait for the copy of versionID in
// flight (0 when none runs).
func (c *templateCopies) waiting(versionID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.flights[versionID]; f != nil {
		return f.waiters
	}
	return 0
}

// templateRootFS returns the path this host boots version v from: its own copy
// when it has one; else the recorded path when it is readable here (a
// record of this host or of another ptd on the same machine, and every
// record written before copies existed: no migration); else a copy made
// now, once however many boots ask at a time. A host that cannot make
// copies (a test fake) boots the recorded path. The error wraps
// sandbox.ErrUnavailable and says why the version could not be had.
func (s *Service) templateRootFS(ctx context.Context, v store.TemplateVersion) (string, error) {
	tc, ok := s.host.(hostapi.TemplateCopies)
	if !ok {
		return v.RootFS, nil
	}
	own, have, err := tc.TemplatePath(v.ID)
	if err != nil {
		return "", err
	}
	if have {
		return own, nil
	}
	if v.RootFS != "" {
		if fi, err := os.Stat(v.RootFS); err == nil && fi.IsDir() {
			return v.RootFS, nil
		}
	}
	c := &s.tplCopies
	c.mu.Lock()
	f, running := c.flights[v.ID]
	if !running {
		f = &copyFlight{done: make(chan struct{})}
		if c.flights == nil {
			c.flights = map[string]*copyFlight{}
		}
		c.flights[v.ID] = f
		// The copy runs apart from the boot that asked: a boot given up
		// (its request ended) leaves it to the others waiting for it.
		s.bg.GoFor(ctx, func(bctx context.Context) {
			bctx, cancel := context.WithTimeout(bctx, s.cfg.TemplateBuildTimeout)
			defer cancel()
			f.rootfs, f.err = s.materialize(bctx, tc, v)
			c.mu.Lock()
			delete(c.flights, v.ID) // a failure is tried again by the next boot
			c.mu.Unlock()
			close(f.done)
		})
	}
	f.waiters++
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.rootfs, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// materialize makes this host's copy of v.
func (s *Service) materialize(ctx context.Context, tc hostapi.TemplateCopies, v store.TemplateVersion) (string, error) {
	log := s.log.With("template", v.Slug, "version", v.ID)
	start := time.Now()
	var rootfs string
	var err error
	if v.OrgID == "" {
		rootfs, err = s.buildPlatformCopy(ctx, v)
	} else {
		rootfs, err = s.downloadTemplate(ctx, tc, v)
	}
	if err != nil {
		log.WarnContext(ctx, "template copy failed", "err", err)
		return "", fmt.Errorf("template version %s (%s): its root filesystem is not on this host and could not be copied here: %w", v.ID, v.Slug, err)
	}
	log.InfoContext(ctx, "template copied to this host", "rootfs", rootfs, "took", time.Since(start))
	return rootfs, nil
}

// buildPlatformCopy builds a platform version from its recipe under its
// own ID on this host.
func (s *Service) buildPlatformCopy(ctx context.Context, v store.TemplateVersion) (string, error) {
	if !s.tpl.known(v.Slug) {
		return "", fmt.Errorf("this host cannot build platform template %q: %w", v.Slug, sandbox.ErrUnavailable)
	}
	rootfs, _, err := s.host.BuildTemplate(ctx, v.Slug, v.ID, nil)
	if err != nil {
		return "", fmt.Errorf("build from the recipe: %v: %w", err, sandbox.ErrUnavailable)
	}
	return rootfs, nil
}

// downloadTemplate unpacks a custom version's copy from the object store.
func (s *Service) downloadTemplate(ctx context.Context, tc hostapi.TemplateCopies, v store.TemplateVersion) (string, error) {
	if s.cfg.Objects == nil {
		return "", fmt.Errorf("no object store is configured to fetch it from: %w", sandbox.ErrUnavailable)
	}
	own, _, err := tc.TemplatePath(v.ID)
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(own)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tarPath := filepath.Join(dir, "download.tar")
	defer os.Remove(tarPath)
	os.Remove(tarPath) // a crash's leftover
	_, err = archive.Restore(ctx, s.cfg.Objects, s.cfg.ArchiveBucket, archive.ManifestKey(templateArchiveID(v.ID)), tarPath, archive.RestoreOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return "", fmt.Errorf("the object store holds no copy of it (built before versions were copied there, or by a ptd without an object store): rebuild the template: %w", sandbox.ErrUnavailable)
	}
	if err != nil {
		return "", fmt.Errorf("fetch from the object store: %v: %w", err, sandbox.ErrUnavailable)
	}
	f, err := os.Open(tarPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	rootfs, _, err := tc.ImportTemplate(ctx, v.ID, f)
	if err != nil {
		return "", fmt.Errorf("unpack: %v: %w", err, sandbox.ErrUnavailable)
	}
	return rootfs, nil
}

// uploadTemplate writes a custom version's rootfs to the object store, so
// hosts that lack it can boot it (downloadTemplate). Without an object
// store, or on a host that cannot export, it does nothing: the version
// then boots only where its rootfs is readable.
func (s *Service) uploadTemplate(ctx context.Context, v store.TemplateVersion) error {
	tc, ok := s.host.(hostapi.TemplateCopies)
	if !ok || s.cfg.Objects == nil {
		return nil
	}
	if err := s.cfg.Objects.EnsureBucket(ctx, s.cfg.ArchiveBucket); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(v.RootFS), "upload-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := tc.ExportTemplate(ctx, v.RootFS, f); err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	_, err = archive.Write(ctx, s.cfg.Objects, s.cfg.ArchiveBucket, f, fi.Size(), archive.Options{ID: templateArchiveID(v.ID)})
	if errors.Is(err, sandbox.ErrAlreadyExists) {
		// A version ID is never reused: a manifest there is a retry's.
		return nil
	}
	return err
}

// deleteTemplateArchive removes a version's copy from the object store:
// its manifest (chunk GC removes the chunks no manifest needs). A version
// with none (a platform one, or one built without an object store) is
// not an error.
func (s *Service) deleteTemplateArchive(ctx context.Context, versionID string) error {
	if s.cfg.Objects == nil {
		return nil
	}
	err := archive.DeleteManifest(ctx, s.cfg.Objects, s.cfg.ArchiveBucket, archive.ManifestKey(templateArchiveID(versionID)))
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return err
	}
	return nil
}

// sweepTemplateCopies removes this host's files of versions whose record
// is gone: a delete made through another ptd removes the record and the
// object store's copy, and only that ptd's host's files. Files of a build
// still running have no record yet: no sweep runs while a build does, and
// a directory changed within SweepGrace (a build or copy that started
// since) is left for the next pass. It returns the versions removed.
func (s *Service) sweepTemplateCopies(ctx context.Context) []string {
	tc, ok := s.host.(hostapi.TemplateCopies)
	tp, ok2 := s.host.(hostapi.Templater)
	if !ok || !ok2 || s.builds.running() > 0 {
		return nil
	}
	dirs, err := tc.TemplateDirs()
	if err != nil {
		s.log.WarnContext(ctx, "sweep template copies", "err", err)
		return nil
	}
	var removed []string
	for _, d := range dirs {
		if time.Since(d.ModTime) < s.cfg.SweepGrace || s.tplCopies.waiting(d.VersionID) > 0 {
			continue
		}
		if _, err := s.store.GetTemplateVersion(ctx, d.VersionID); !store.IsNotFound(err) {
			continue
		}
		if err := tp.RemoveTemplate(ctx, d.VersionID); err != nil {
			s.log.WarnContext(ctx, "sweep template copies", "version", d.VersionID, "err", err)
			continue
		}
		removed = append(removed, d.VersionID)
	}
	if len(removed) > 0 {
		s.log.InfoContext(ctx, "swept template files no version record owns", "versions", removed)
	}
	return removed
}

// startedStateElsewhere says why a version's started-state snapshot
// cannot be restored here: it is on the disk of the host that built it
// (its build's record names it), not in the object store. Empty when the
// version has none, it was built here, or its build names no host (records
// made before builds kept it).
func (s *Service) startedStateElsewhere(ctx context.Context, v store.TemplateVersion) string {
	if v.Spec.Started == nil || v.BuildID == "" {
		return ""
	}
	b, err := s.store.GetTemplateBuild(ctx, "", v.BuildID)
	if err != nil {
		return ""
	}
	var rec buildRequestRecord
	if json.Unmarshal([]byte(b.Request), &rec) != nil || rec.Host == "" || rec.Host == s.host.ID() {
		return ""
	}
	return fmt.Sprintf("the template's started state is on host %s, where it was built: booted cold", rec.Host)
}

// collectTemplateArchives deletes the object store's copies of versions
// that have no record a day after they were written: a delete whose
// manifest removal failed, or a build that wrote its copy and then failed
// or was cut short before it recorded its version (a build in flight has
// no record yet, so younger copies stay). It runs with the chunk GC, which
// then frees their chunks.
func (s *Service) collectTemplateArchives(ctx context.Context, now time.Time) {
	prefix := archive.ManifestPrefix + templateArchiveID(sandbox.PrefixTemplateVersion)
	var gone []string
	for info, err := range s.cfg.Objects.List(ctx, s.cfg.ArchiveBucket, prefix) {
		if err != nil {
			if !errors.Is(err, objstore.ErrNotFound) {
				s.log.WarnContext(ctx, "template archives", "err", err)
			}
			return
		}
		id := strings.TrimSuffix(strings.TrimPrefix(info.Key, archive.ManifestPrefix), ".json")
		if !sandbox.ValidID(sandbox.PrefixTemplateVersion, id) || now.Sub(info.ModTime) < archive.DefaultGCGrace {
			continue
		}
		if _, err := s.store.GetTemplateVersion(ctx, id); store.IsNotFound(err) {
			gone = append(gone, id)
		}
	}
	for _, id := range gone {
		if err := s.deleteTemplateArchive(ctx, id); err != nil {
			s.log.WarnContext(ctx, "template archives", "version", id, "err", err)
		}
	}
	if len(gone) > 0 {
		s.log.InfoContext(ctx, "deleted template copies no version record owns", "versions", gone)
	}
}
