package controlplane

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// TemplateVersion is one build of a template slug with its number among
// the slug's builds (1 for the first, failed builds included).
type TemplateVersion struct {
	store.TemplateVersion
	Number int
}

// resolveTemplate fills a create's template: a pinned version names its
// slug (and must be ready, and the platform's or the caller org's), a
// custom template of the org pins its newest ready version, and a create
// naming neither gets the server's default template. It returns the
// pinned custom version, whose settings give the create's defaults.
func (s *Service) resolveTemplate(ctx context.Context, p Principal, r *CreateRequest) (*store.TemplateVersion, error) {
	if r.TemplateVersionID == "" {
		if r.Template == "" {
			r.Template = s.cfg.Templates.Default
		}
		if s.tpl.known(r.Template) {
			return nil, nil
		}
		v, ok, err := s.latestCustom(ctx, p.OrgID, r.Template)
		if err != nil || !ok {
			return nil, err // not found is the caller's to say
		}
		r.TemplateVersionID = v.ID
		return &v, nil
	}
	notFound := fmt.Errorf("template version %q: %w", r.TemplateVersionID, &sandbox.NotFoundFieldError{Name: "template_version_id"})
	if !sandbox.ValidID(sandbox.PrefixTemplateVersion, r.TemplateVersionID) {
		return nil, notFound
	}
	v, err := s.store.GetTemplateVersion(ctx, r.TemplateVersionID)
	if store.IsNotFound(err) || (err == nil && v.OrgID != "" && v.OrgID != p.OrgID) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	if r.Template != "" && r.Template != v.Slug {
		return nil, &sandbox.FieldError{Field: "template_version_id", Reason: fmt.Sprintf("is a version of %q, not of template %q", v.Slug, r.Template)}
	}
	if v.Status != store.TemplateReady {
		return nil, &sandbox.FieldError{Field: "template_version_id", Reason: fmt.Sprintf("is %s; pin a ready version", v.Status)}
	}
	r.Template = v.Slug
	if v.OrgID == "" {
		return nil, nil
	}
	return &v, nil
}

// TemplateVersions lists every build of slug, newest first.
func (s *Service) TemplateVersions(ctx context.Context, slug string) ([]TemplateVersion, error) {
	if !s.tpl.known(slug) {
		return nil, fmt.Errorf("template %q: %w", slug, sandbox.ErrNotFound)
	}
	all, err := s.store.ListTemplateVersions(ctx)
	if err != nil {
		return nil, err
	}
	var vs []store.TemplateVersion
	for _, v := range all {
		if v.Slug == slug {
			vs = append(vs, v)
		}
	}
	out := make([]TemplateVersion, 0, len(vs))
	for i, v := range vs {
		out = append(out, TemplateVersion{TemplateVersion: v, Number: len(vs) - i})
	}
	return out, nil
}

// number returns a version's number among its slug's builds (0 if
// unknown). Versions are never renumbered, so answers are cached.
func (t *templates) number(ctx context.Context, versionID string) int {
	t.mu.Lock()
	n, ok := t.numbers[versionID]
	t.mu.Unlock()
	if ok {
		return n
	}
	v, err := t.s.store.GetTemplateVersion(ctx, versionID)
	if err != nil {
		return 0
	}
	vs, err := t.s.TemplateVersionsFor(ctx, Principal{OrgID: v.OrgID}, v.Slug)
	if err != nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.numbers == nil {
		t.numbers = map[string]int{}
	}
	for _, tv := range vs {
		t.numbers[tv.ID] = tv.Number
	}
	return t.numbers[versionID]
}

// NewTemplateVersion starts a new build of slug and returns its version
// (status building). Sandboxes keep the version they run; creates get the
// new one once it is ready. While a build of slug runs, it returns that
// build's version instead of starting another.
func (s *Service) NewTemplateVersion(ctx context.Context, slug string) (TemplateVersion, error) {
	if !s.tpl.known(slug) {
		return TemplateVersion{}, fmt.Errorf("template %q: %w", slug, sandbox.ErrNotFound)
	}
	if !s.RunsSandboxes() {
		return TemplateVersion{}, fmt.Errorf("build template %q: this ptd runs no sandboxes (--role=api); ask a host's ptd: %w", slug, sandbox.ErrUnavailable)
	}
	before, err := s.store.LatestTemplateVersion(ctx, slug)
	if err != nil && !store.IsNotFound(err) {
		return TemplateVersion{}, err
	}
	running := err == nil && before.Status == store.TemplateBuilding
	s.tpl.startBuild(slug, true)
	// The build records its version as its first step: wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := s.store.LatestTemplateVersion(ctx, slug)
		if err != nil && !store.IsNotFound(err) {
			return TemplateVersion{}, err
		}
		if err == nil && (running || v.ID != before.ID) {
			vs, err := s.TemplateVersions(ctx, slug)
			if err != nil {
				return TemplateVersion{}, err
			}
			if i := slices.IndexFunc(vs, func(tv TemplateVersion) bool { return tv.ID == v.ID }); i >= 0 {
				return vs[i], nil
			}
		}
		if time.Now().After(deadline) {
			return TemplateVersion{}, fmt.Errorf("template %q: build did not start: %w", slug, sandbox.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return TemplateVersion{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
