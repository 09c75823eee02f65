package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
	_, err = s.pool.Exec(ctx, `INSERT INTO template_versions (`+templateCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
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
		ts(v.CreatedAt, t), ts(v.UpdatedAt, t), v.OrgID, v.BuildID, string(spec))
	if err != nil {
		return fmt.Errorf("put template version %q: %w", v.ID, err)
	}
	return nil
}

// GetTemplateVersion returns the version with that ID; ErrNotFound if absent.
func (s *Store) GetTemplateVersion(ctx context.Context, id string) (store.TemplateVersion, error) {
	return getOne(s.pool.QueryRow(ctx,
		`SELECT `+templateCols+` FROM template_versions WHERE id = $1`, id), dec.Template, "template version", id)
}

// LatestTemplateVersion returns the platform slug's newest version in any
// status; ErrNotFound if it has none.
func (s *Store) LatestTemplateVersion(ctx context.Context, slug string) (store.TemplateVersion, error) {
	v, err := dec.Template(s.pool.QueryRow(ctx,
		`SELECT `+templateCols+` FROM template_versions WHERE slug = $1 AND org_id = ''
		 ORDER BY created_at DESC, id DESC LIMIT 1`, slug))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.TemplateVersion{}, fmt.Errorf("template %q: no versions: %w", slug, store.ErrNotFound)
	}
	if err != nil {
		return store.TemplateVersion{}, fmt.Errorf("latest template version %q: %w", slug, err)
	}
	return v, nil
}

// ListTemplateVersions returns every version of every slug, newest first.
func (s *Store) ListTemplateVersions(ctx context.Context) ([]store.TemplateVersion, error) {
	vs, err := queryAll(ctx, s.pool, dec.Template,
		`SELECT `+templateCols+` FROM template_versions ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list template versions: %w", err)
	}
	return vs, nil
}

// ListTemplateVersionsOf implements store.TemplateBuildStore.
func (s *Store) ListTemplateVersionsOf(ctx context.Context, orgID, slug string) ([]store.TemplateVersion, error) {
	q, args := `SELECT `+templateCols+` FROM template_versions WHERE org_id = $1`, []any{orgID}
	if slug != "" {
		q, args = q+` AND slug = $2`, append(args, slug)
	}
	vs, err := queryAll(ctx, s.pool, dec.Template, q+` ORDER BY created_at DESC, id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list template versions of %q: %w", slug, err)
	}
	return vs, nil
}

// DeleteTemplateVersion implements store.TemplateBuildStore.
func (s *Store) DeleteTemplateVersion(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM template_versions WHERE id = $1`, id); err != nil {
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
	created := ts(b.CreatedAt, t)
	res, err := s.pool.Exec(ctx, `INSERT INTO template_builds (`+buildCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING`,
		b.ID, b.OrgID, b.Slug, string(b.Status), b.Request, b.VersionID, b.Error, failure, nonNilBytes(b.Log), b.BoxID,
		created, ts(b.UpdatedAt, t), finished)
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
	res, err := s.pool.Exec(ctx, `UPDATE template_builds SET status = $1, version_id = $2, error = $3, failure = $4,
		log = $5, box_id = $6, updated_at = $7, finished_at = $8 WHERE id = $9`,
		string(b.Status), b.VersionID, b.Error, failure, nonNilBytes(b.Log), b.BoxID, now(), finished, b.ID)
	if err != nil {
		return fmt.Errorf("update template build %q: %w", b.ID, err)
	}
	if res.RowsAffected() == 0 {
		return fmt.Errorf("template build %q: %w", b.ID, store.ErrNotFound)
	}
	return nil
}

func buildExtras(b store.TemplateBuild) (failure string, finished *time.Time, err error) {
	if b.Failure != nil {
		f, err := json.Marshal(b.Failure)
		if err != nil {
			return "", nil, err
		}
		failure = string(f)
	}
	return failure, optTS(b.FinishedAt), nil
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// GetTemplateBuild implements store.TemplateBuildStore.
func (s *Store) GetTemplateBuild(ctx context.Context, orgID, id string) (store.TemplateBuild, error) {
	b, err := getOne(s.pool.QueryRow(ctx, `SELECT `+buildCols+` FROM template_builds WHERE id = $1`, id),
		dec.Build, "template build", id)
	if err == nil && orgID != "" && b.OrgID != orgID {
		return store.TemplateBuild{}, fmt.Errorf("template build %q: %w", id, store.ErrNotFound)
	}
	return b, err
}

// ListTemplateBuilds implements store.TemplateBuildStore.
func (s *Store) ListTemplateBuilds(ctx context.Context, f store.BuildFilter) ([]store.TemplateBuild, error) {
	q := `SELECT id, org_id, slug, status, request, version_id, error, failure, ''::bytea, box_id, created_at, updated_at, finished_at
		FROM template_builds WHERE 1 = 1`
	var args []any
	if f.OrgID != "" {
		q, args = q+fmt.Sprintf(` AND org_id = $%d`, len(args)+1), append(args, f.OrgID)
	}
	if f.Slug != "" {
		q, args = q+fmt.Sprintf(` AND slug = $%d`, len(args)+1), append(args, f.Slug)
	}
	if f.Status != "" {
		q, args = q+fmt.Sprintf(` AND status = $%d`, len(args)+1), append(args, string(f.Status))
	}
	bs, err := queryAll(ctx, s.pool, dec.Build, q+` ORDER BY created_at DESC, id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list template builds: %w", err)
	}
	return bs, nil
}

const cacheCols = `org_id, key, snapshot_id, ready, created_at, used_at`

// PutBuildCache implements store.TemplateBuildStore.
func (s *Store) PutBuildCache(ctx context.Context, e store.BuildCacheEntry) error {
	t := now()
	_, err := s.pool.Exec(ctx, `INSERT INTO template_build_cache (`+cacheCols+`) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (org_id, key) DO UPDATE SET snapshot_id = excluded.snapshot_id, ready = excluded.ready,
			used_at = excluded.used_at`,
		e.OrgID, e.Key, e.SnapshotID, e.Ready, ts(e.CreatedAt, t), ts(e.UsedAt, t))
	if err != nil {
		return fmt.Errorf("put build cache %q: %w", e.Key, err)
	}
	return nil
}

// GetBuildCache implements store.TemplateBuildStore.
func (s *Store) GetBuildCache(ctx context.Context, orgID, key string) (store.BuildCacheEntry, error) {
	return getOne(s.pool.QueryRow(ctx, `SELECT `+cacheCols+` FROM template_build_cache WHERE org_id = $1 AND key = $2`,
		orgID, key), dec.BuildCache, "build cache entry", key)
}

// ListBuildCache implements store.TemplateBuildStore.
func (s *Store) ListBuildCache(ctx context.Context, orgID string) ([]store.BuildCacheEntry, error) {
	q, args := `SELECT `+cacheCols+` FROM template_build_cache`, []any{}
	if orgID != "" {
		q, args = q+` WHERE org_id = $1`, append(args, orgID)
	}
	es, err := queryAll(ctx, s.pool, dec.BuildCache, q+` ORDER BY used_at, key`, args...)
	if err != nil {
		return nil, fmt.Errorf("list build cache: %w", err)
	}
	return es, nil
}

// DeleteBuildCache implements store.TemplateBuildStore.
func (s *Store) DeleteBuildCache(ctx context.Context, orgID, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM template_build_cache WHERE org_id = $1 AND key = $2`, orgID, key); err != nil {
		return fmt.Errorf("delete build cache %q: %w", key, err)
	}
	return nil
}

const credCols = `org_id, registry, username, sealed, kind, created_at, updated_at`

// PutRegistryCredential implements store.TemplateBuildStore.
func (s *Store) PutRegistryCredential(ctx context.Context, c store.RegistryCredential) error {
	t := now()
	_, err := s.pool.Exec(ctx, `INSERT INTO registry_credentials (`+credCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (org_id, registry) DO UPDATE SET username = excluded.username, sealed = excluded.sealed,
			kind = excluded.kind, updated_at = excluded.updated_at`,
		c.OrgID, c.Registry, c.Username, nonNilBytes(c.Sealed), c.Kind, ts(c.CreatedAt, t), ts(c.UpdatedAt, t))
	if err != nil {
		return fmt.Errorf("put registry credential %q: %w", c.Registry, err)
	}
	return nil
}

// GetRegistryCredential implements store.TemplateBuildStore.
func (s *Store) GetRegistryCredential(ctx context.Context, orgID, registry string) (store.RegistryCredential, error) {
	return getOne(s.pool.QueryRow(ctx, `SELECT `+credCols+` FROM registry_credentials WHERE org_id = $1 AND registry = $2`,
		orgID, registry), dec.Credential, "registry credential", registry)
}

// ListRegistryCredentials implements store.TemplateBuildStore.
func (s *Store) ListRegistryCredentials(ctx context.Context, orgID string) ([]store.RegistryCredential, error) {
	cs, err := queryAll(ctx, s.pool, dec.Credential, `SELECT `+credCols+` FROM registry_credentials WHERE org_id = $1 ORDER BY registry`, orgID)
	if err != nil {
		return nil, fmt.Errorf("list registry credentials: %w", err)
	}
	return cs, nil
}

// DeleteRegistryCredential implements store.TemplateBuildStore.
func (s *Store) DeleteRegistryCredential(ctx context.Context, orgID, registry string) error {
	res, err := s.pool.Exec(ctx, `DELETE FROM registry_credentials WHERE org_id = $1 AND registry = $2`, orgID, registry)
	if err != nil {
		return fmt.Errorf("delete registry credential %q: %w", registry, err)
	}
	if res.RowsAffected() == 0 {
		return fmt.Errorf("registry credential %q: %w", registry, store.ErrNotFound)
	}
	return nil
}
