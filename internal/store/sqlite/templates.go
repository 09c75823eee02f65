package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

const templateCols = `id, slug, status, progress, rootfs, size_bytes, error, created_at, updated_at, org_id, build_id, spec`

// PutTemplateVersion inserts v, or replaces the version with its ID while
// keeping the stored CreatedAt. Zero times mean now.
func (s *Store) PutTemplateVersion(ctx context.Context, v store.TemplateVersion) error {
	t := now()
	spec, err := json.Marshal(v.Spec)
	if err != nil {
		return fmt.Errorf("put template version %q: %w", v.ID, err)
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO template_versions (`+templateCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			slug = excluded.slug,
			status = excluded.status,
			progress = excluded.progress,
			rootfs = excluded.rootfs,
			size_bytes = excluded.size_bytes,
			error = excluded.error,
			updated_at = excluded.updated_at,
			org_id = excluded.org_id,
			build_id = excluded.build_id,
			spec = excluded.spec`,
		v.ID, v.Slug, string(v.Status), v.Progress, v.RootFS, v.SizeBytes, v.Error,
		formatTime(v.CreatedAt, t), formatTime(v.UpdatedAt, t), v.OrgID, v.BuildID, string(spec))
	if err != nil {
		return fmt.Errorf("put template version %q: %w", v.ID, err)
	}
	return nil
}

// GetTemplateVersion returns the version with that ID; ErrNotFound if absent.
func (s *Store) GetTemplateVersion(ctx context.Context, id string) (store.TemplateVersion, error) {
	return getOne(s.r.QueryRowContext(ctx,
		`SELECT `+templateCols+` FROM template_versions WHERE id = ?`, id), dec.Template, "template version", id)
}

// LatestTemplateVersion returns the platform slug's newest version in any
// status; ErrNotFound if it has none.
func (s *Store) LatestTemplateVersion(ctx context.Context, slug string) (store.TemplateVersion, error) {
	v, err := dec.Template(s.r.QueryRowContext(ctx,
		`SELECT `+templateCols+` FROM template_versions WHERE slug = ? AND org_id = ''
		 ORDER BY created_at DESC, id DESC LIMIT 1`, slug))
	if errors.Is(err, sql.ErrNoRows) {
		return store.TemplateVersion{}, fmt.Errorf("template %q: no versions: %w", slug, store.ErrNotFound)
	}
	if err != nil {
		return store.TemplateVersion{}, fmt.Errorf("latest template version %q: %w", slug, err)
	}
	return v, nil
}

// ListTemplateVersions returns every version of every slug, newest first.
func (s *Store) ListTemplateVersions(ctx context.Context) ([]store.TemplateVersion, error) {
	vs, err := queryAll(ctx, s.r, dec.Template,
		`SELECT `+templateCols+` FROM template_versions ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list template versions: %w", err)
	}
	return vs, nil
}

// ListTemplateVersionsOf implements store.TemplateBuildStore.
func (s *Store) ListTemplateVersionsOf(ctx context.Context, orgID, slug string) ([]store.TemplateVersion, error) {
	q, args := `SELECT `+templateCols+` FROM template_versions WHERE org_id = ?`, []any{orgID}
	if slug != "" {
		q, args = q+` AND slug = ?`, append(args, slug)
	}
	vs, err := queryAll(ctx, s.r, dec.Template, q+` ORDER BY created_at DESC, id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list template versions of %q: %w", slug, err)
	}
	return vs, nil
}

// DeleteTemplateVersion implements store.TemplateBuildStore.
func (s *Store) DeleteTemplateVersion(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM template_versions WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete template version %q: %w", id, err)
	}
	return nil
}

const buildCols = `id, org_id, slug, status, request, version_id, error, failure, log, box_id, created_at, updated_at, finished_at`

// CreateTemplateBuild implements store.TemplateBuildStore.
func (s *Store) CreateTemplateBuild(ctx context.Context, b store.TemplateBuild) error {
	failure, finished, err := buildExtras(b)
	if err != nil {
		return fmt.Errorf("create template build %q: %w", b.ID, err)
	}
	t := now()
	created := formatTime(b.CreatedAt, t)
	res, err := s.w.ExecContext(ctx, `INSERT INTO template_builds (`+buildCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		b.ID, b.OrgID, b.Slug, string(b.Status), b.Request, b.VersionID, b.Error, failure, nonNilBytes(b.Log), b.BoxID,
		created, formatTime(b.UpdatedAt, t), finished)
	if err != nil {
		return fmt.Errorf("create template build %q: %w", b.ID, err)
	}
	return conflictUnlessInserted(res, "template build", b.ID)
}

// UpdateTemplateBuild implements store.TemplateBuildStore.
func (s *Store) UpdateTemplateBuild(ctx context.Context, b store.TemplateBuild) error {
	failure, finished, err := buildExtras(b)
	if err != nil {
		return fmt.Errorf("update template build %q: %w", b.ID, err)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE template_builds SET status = ?, version_id = ?, error = ?, failure = ?,
		log = ?, box_id = ?, updated_at = ?, finished_at = ? WHERE id = ?`,
		string(b.Status), b.VersionID, b.Error, failure, nonNilBytes(b.Log), b.BoxID, sandbox.FormatTime(now()), finished, b.ID)
	if err != nil {
		return fmt.Errorf("update template build %q: %w", b.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("template build %q: %w", b.ID, store.ErrNotFound)
	}
	return nil
}

func buildExtras(b store.TemplateBuild) (failure, finished string, err error) {
	if b.Failure != nil {
		f, err := json.Marshal(b.Failure)
		if err != nil {
			return "", "", err
		}
		failure = string(f)
	}
	if b.FinishedAt != nil {
		finished = sandbox.FormatTime(*b.FinishedAt)
	}
	return failure, finished, nil
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// GetTemplateBuild implements store.TemplateBuildStore.
func (s *Store) GetTemplateBuild(ctx context.Context, orgID, id string) (store.TemplateBuild, error) {
	b, err := getOne(s.r.QueryRowContext(ctx, `SELECT `+buildCols+` FROM template_builds WHERE id = ?`, id),
		dec.Build, "template build", id)
	if err == nil && orgID != "" && b.OrgID != orgID {
		return store.TemplateBuild{}, fmt.Errorf("template build %q: %w", id, store.ErrNotFound)
	}
	return b, err
}

// ListTemplateBuilds implements store.TemplateBuildStore.
func (s *Store) ListTemplateBuilds(ctx context.Context, f store.BuildFilter) ([]store.TemplateBuild, error) {
	q := `SELECT id, org_id, slug, status, request, version_id, error, failure, x'', box_id, created_at, updated_at, finished_at
		FROM template_builds WHERE 1 = 1`
	var args []any
	if f.OrgID != "" {
		q, args = q+` AND org_id = ?`, append(args, f.OrgID)
	}
	if f.Slug != "" {
		q, args = q+` AND slug = ?`, append(args, f.Slug)
	}
	if f.Status != "" {
		q, args = q+` AND status = ?`, append(args, string(f.Status))
	}
	bs, err := queryAll(ctx, s.r, dec.Build, q+` ORDER BY created_at DESC, id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list template builds: %w", err)
	}
	return bs, nil
}

const cacheCols = `org_id, key, snapshot_id, ready, created_at, used_at`

// PutBuildCache implements store.TemplateBuildStore.
func (s *Store) PutBuildCache(ctx context.Context, e store.BuildCacheEntry) error {
	t := now()
	_, err := s.w.ExecContext(ctx, `INSERT INTO template_build_cache (`+cacheCols+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, key) DO UPDATE SET snapshot_id = excluded.snapshot_id, ready = excluded.ready,
			used_at = excluded.used_at`,
		e.OrgID, e.Key, e.SnapshotID, e.Ready, formatTime(e.CreatedAt, t), formatTime(e.UsedAt, t))
	if err != nil {
		return fmt.Errorf("put build cache %q: %w", e.Key, err)
	}
	return nil
}

// GetBuildCache implements store.TemplateBuildStore.
func (s *Store) GetBuildCache(ctx context.Context, orgID, key string) (store.BuildCacheEntry, error) {
	return getOne(s.r.QueryRowContext(ctx, `SELECT `+cacheCols+` FROM template_build_cache WHERE org_id = ? AND key = ?`,
		orgID, key), dec.BuildCache, "build cache entry", key)
}

// ListBuildCache implements store.TemplateBuildStore.
func (s *Store) ListBuildCache(ctx context.Context, orgID string) ([]store.BuildCacheEntry, error) {
	q, args := `SELECT `+cacheCols+` FROM template_build_cache`, []any{}
	if orgID != "" {
		q, args = q+` WHERE org_id = ?`, append(args, orgID)
	}
	es, err := queryAll(ctx, s.r, dec.BuildCache, q+` ORDER BY used_at, key`, args...)
	if err != nil {
		return nil, fmt.Errorf("list build cache: %w", err)
	}
	return es, nil
}

// DeleteBuildCache implements store.TemplateBuildStore.
func (s *Store) DeleteBuildCache(ctx context.Context, orgID, key string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM template_build_cache WHERE org_id = ? AND key = ?`, orgID, key); err != nil {
		return fmt.Errorf("delete build cache %q: %w", key, err)
	}
	return nil
}

const credCols = `org_id, registry, username, sealed, kind, created_at, updated_at`

// PutRegistryCredential implements store.TemplateBuildStore.
func (s *Store) PutRegistryCredential(ctx context.Context, c store.RegistryCredential) error {
	t := now()
	_, err := s.w.ExecContext(ctx, `INSERT INTO registry_credentials (`+credCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, registry) DO UPDATE SET username = excluded.username, sealed = excluded.sealed,
			kind = excluded.kind, updated_at = excluded.updated_at`,
		c.OrgID, c.Registry, c.Username, nonNilBytes(c.Sealed), c.Kind, formatTime(c.CreatedAt, t), formatTime(c.UpdatedAt, t))
	if err != nil {
		return fmt.Errorf("put registry credential %q: %w", c.Registry, err)
	}
	return nil
}

// GetRegistryCredential implements store.TemplateBuildStore.
func (s *Store) GetRegistryCredential(ctx context.Context, orgID, registry string) (store.RegistryCredential, error) {
	return getOne(s.r.QueryRowContext(ctx, `SELECT `+credCols+` FROM registry_credentials WHERE org_id = ? AND registry = ?`,
		orgID, registry), dec.Credential, "registry credential", registry)
}

// ListRegistryCredentials implements store.TemplateBuildStore.
func (s *Store) ListRegistryCredentials(ctx context.Context, orgID string) ([]store.RegistryCredential, error) {
	cs, err := queryAll(ctx, s.r, dec.Credential, `SELECT `+credCols+` FROM registry_credentials WHERE org_id = ? ORDER BY registry`, orgID)
	if err != nil {
		return nil, fmt.Errorf("list registry credentials: %w", err)
	}
	return cs, nil
}

// DeleteRegistryCredential implements store.TemplateBuildStore.
func (s *Store) DeleteRegistryCredential(ctx context.Context, orgID, registry string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM registry_credentials WHERE org_id = ? AND registry = ?`, orgID, registry)
	if err != nil {
		return fmt.Errorf("delete registry credential %q: %w", registry, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("registry credential %q: %w", registry, store.ErrNotFound)
	}
	return nil
}
