package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Template is a slug with the state of its newest version.
type Template struct {
	Slug    string
	Version *store.TemplateVersion // nil when never built
	// Number is Version's number among the slug's builds; Default is true
	// for the server's default template.
	Number  int
	Default bool
}

// templates builds template versions on first use, once per slug at a time.
type templates struct {
	s        *Service
	mu       sync.Mutex
	building map[string]chan struct{} // slug → closed when the build ends
	numbers  map[string]int           // version ID → number (template_versions.go)
	// deleting serialises custom template deletes (custom_templates.go).
	deleting sync.Mutex
}

// lockDelete serialises deletes of custom template versions.
func (t *templates) lockDelete() func() {
	t.deleting.Lock()
	return t.deleting.Unlock
}

func newTemplates(s *Service) *templates {
	return &templates{s: s, building: map[string]chan struct{}{}}
}

// known reports whether the host can build slug.
func (t *templates) known(slug string) bool { return slices.Contains(t.s.host.Templates(), slug) }

// ready returns the newest ready version of slug, starting a build when
// there is none (or the last one failed) and waiting for it until ctx ends.
func (t *templates) ready(ctx context.Context, slug string) (store.TemplateVersion, error) {
	for {
		v, err := t.s.store.LatestTemplateVersion(ctx, slug)
		if err == nil && v.Status == store.TemplateReady {
			return v, nil
		}
		if err != nil && !store.IsNotFound(err) {
			return store.TemplateVersion{}, err
		}
		done := t.startBuild(slug, err == nil && v.Status == store.TemplateFailed)
		select {
		case <-done:
			v, err := t.s.store.LatestTemplateVersion(ctx, slug)
			if err != nil {
				return store.TemplateVersion{}, err
			}
			if v.Status == store.TemplateFailed {
				return v, fmt.Errorf("template %s build failed: %s: %w", slug, v.Error, sandbox.ErrUnavailable)
			}
		case <-ctx.Done():
			return store.TemplateVersion{}, ctx.Err()
		}
	}
}

// BuildTemplate starts a new build of slug (unless one runs) and returns
// once the build has recorded its version.
func (s *Service) BuildTemplate(ctx context.Context, slug string) (Template, error) {
	if !s.tpl.known(slug) {
		return Template{}, fmt.Errorf("template %q: %w", slug, sandbox.ErrNotFound)
	}
	// Answer once the build has recorded its version, so the answer says
	// building rather than what the slug was before.
	if _, err := s.NewTemplateVersion(ctx, slug); err != nil {
		return Template{}, err
	}
	return s.GetTemplate(ctx, slug)
}

// startBuild starts a build of slug unless one is running. force builds
// even when a ready version exists. It returns a channel closed when the
// running build ends.
func (t *templates) startBuild(slug string, force bool) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.s.RunsSandboxes() {
		// A failed build here would be the shared store's newest version.
		done := make(chan struct{})
		close(done)
		return done
	}
	if ch, ok := t.building[slug]; ok {
		return ch
	}
	ch := make(chan struct{})
	t.building[slug] = ch
	t.s.bg.Go(func(ctx context.Context) {
		defer func() {
			t.mu.Lock()
			delete(t.building, slug)
			t.mu.Unlock()
			close(ch)
		}()
		if !force {
			if v, err := t.s.store.LatestTemplateVersion(ctx, slug); err == nil && v.Status == store.TemplateReady {
				return
			}
		}
		t.build(ctx, slug)
	})
	return ch
}

func (t *templates) build(ctx context.Context, slug string) {
	now := time.Now().UTC()
	v := store.TemplateVersion{
		ID: sandbox.NewID(sandbox.PrefixTemplateVersion), Slug: slug,
		Status: store.TemplateBuilding, Progress: "starting", CreatedAt: now, UpdatedAt: now,
		HostID: t.s.host.ID(), // which ptd fails it if it is interrupted
	}
	log := t.s.log.With("template", slug, "version", v.ID)
	if err := t.s.store.PutTemplateVersion(ctx, v); err != nil {
		log.ErrorContext(ctx, "template build: record", "err", err)
		return
	}
	log.InfoContext(ctx, "template build started")
	ctx, cancel := context.WithTimeout(ctx, t.s.cfg.TemplateBuildTimeout)
	defer cancel()

	var pmu sync.Mutex
	lastSave := time.Time{}
	progress := func(line string) {
		pmu.Lock()
		defer pmu.Unlock()
		log.InfoContext(ctx, "template build", "progress", line)
		if time.Since(lastSave) < 300*time.Millisecond {
			return
		}
		lastSave = time.Now()
		v.Progress, v.UpdatedAt = line, time.Now().UTC()
		if err := t.s.store.PutTemplateVersion(ctx, v); err != nil {
			log.WarnContext(ctx, "template build: save progress", "err", err)
		}
	}
	rootfs, size, err := t.s.host.BuildTemplate(ctx, slug, v.ID, progress)
	pmu.Lock()
	defer pmu.Unlock()
	v.UpdatedAt = time.Now().UTC()
	if err != nil {
		v.Status, v.Error, v.Progress = store.TemplateFailed, err.Error(), "failed"
		log.ErrorContext(ctx, "template build failed", "err", err)
	} else {
		v.Status, v.RootFS, v.SizeBytes, v.Progress = store.TemplateReady, rootfs, size, "ready"
		log.InfoContext(ctx, "template build done", "size_bytes", size)
	}
	// Save even when ctx was cancelled, so no version stays "building".
	if err := t.s.store.PutTemplateVersion(context.WithoutCancel(ctx), v); err != nil {
		log.ErrorContext(ctx, "template build: save result", "err", err)
	}
}

// ListTemplates returns every known slug with its newest version.
func (s *Service) ListTemplates(ctx context.Context) ([]Template, error) {
	var out []Template
	for _, slug := range s.host.Templates() {
		t, err := s.GetTemplate(ctx, slug)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// GetTemplate returns one slug with its newest version.
func (s *Service) GetTemplate(ctx context.Context, slug string) (Template, error) {
	if !s.tpl.known(slug) {
		return Template{}, fmt.Errorf("template %q: %w", slug, sandbox.ErrNotFound)
	}
	v, err := s.store.LatestTemplateVersion(ctx, slug)
	if store.IsNotFound(err) {
		return Template{Slug: slug, Default: slug == s.cfg.Templates.Default}, nil
	}
	if err != nil {
		return Template{}, err
	}
	return Template{Slug: slug, Version: &v, Number: s.tpl.number(ctx, v.ID), Default: slug == s.cfg.Templates.Default}, nil
}

// failInterruptedBuilds marks versions left "building" by a crash as
// failed, so the next use starts a fresh build instead of waiting forever:
// those of this ptd's host, of a lost or unknown one, or naming none. A
// version another live host is building is left to it (that ptd fails it
// itself when it starts again), so a ptd starting on a shared store never
// fails another's build (docs/ARCHITECTURE.md, "Ownership").
func (t *templates) failInterruptedBuilds(ctx context.Context) error {
	vs, err := t.s.store.ListTemplateVersions(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range vs {
		if v.Status != store.TemplateBuilding || t.s.builtElsewhere(ctx, v.HostID) {
			continue
		}
		v.Status, v.Error, v.Progress, v.UpdatedAt = store.TemplateFailed, "interrupted by a ptd restart", "failed", time.Now().UTC()
		errs = append(errs, t.s.store.PutTemplateVersion(ctx, v))
	}
	return errors.Join(errs...)
}
