// This file is store.TemplateBuildStore (template versions, template
// builds, the build cache and registry credentials) for both SQL stores.
// Their tables, queries and checks are the same in SQLite and PostgreSQL
// but for placeholders and the stored form of times, which the store's
// sqldb.DB supplies, and two spellings Dialect names; written once, the two
// stores cannot drift apart (storetest checks both).

package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

const templateCols = `id, slug, status, progress, rootfs, size_bytes, error, created_at, updated_at, org_id, build_id, spec, host_id`

// PutTemplateVersion inserts v, or replaces the version with its ID while
// keeping the stored CreatedAt. Zero times mean now.
func (s *Store) PutTemplateVersion(ctx context.Context, v store.TemplateVersion) error {
	t := sqldb.Now()
	spec, err := json.Marshal(v.Spec)
	if err != nil {
		return fmt.Errorf("put template version %q: %w", v.ID, err)
	}
	return sqldb.Write(ctx, s.db, fmt.Sprintf("put template version %q", v.ID),
		`INSERT INTO template_versions (`+templateCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
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
			spec = excluded.spec,
			host_id = excluded.host_id`,
		v.ID, v.Slug, string(v.Status), v.Progress, v.RootFS, v.SizeBytes, v.Error,
		s.db.Time(sqldb.Or(v.CreatedAt, t)), s.db.Time(sqldb.Or(v.UpdatedAt, t)), v.OrgID, v.BuildID, string(spec), v.HostID)
}

// GetTemplateVersion returns the version with that ID; ErrNotFound if absent.
func (s *Store) GetTemplateVersion(ctx context.Context, id string) (store.TemplateVersion, error) {
	return sqldb.One(ctx, s.db, s.db.Decoder().Template, "template version", id,
		`SELECT `+templateCols+` FROM template_versions WHERE id = ?`, id)
}

// LatestTemplateVersion returns the platform slug's newest version in any
// status; ErrNotFound if it has none.
func (s *Store) LatestTemplateVersion(ctx context.Context, slug string) (store.TemplateVersion, error) {
	v, err := s.db.Decoder().Template(s.db.QueryRow(ctx,
		`SELECT `+templateCols+` FROM template_versions WHERE slug = ? AND org_id = ''
		 ORDER BY created_at DESC, id DESC LIMIT 1`, slug))
	if errors.Is(err, s.db.NoRows()) {
		return store.TemplateVersion{}, fmt.Errorf("template %q: no versions: %w", slug, store.ErrNotFound)
	}
	if err != nil {
		return store.TemplateVersion{}, fmt.Errorf("latest template version %q: %w", slug, err)
	}
	return v, nil
}

// ListTemplateVersions returns every version of every slug, newest first.
func (s *Store) ListTemplateVersions(ctx context.Context) ([]store.TemplateVersion, error) {
	return s.listVersions(ctx, "list template versions",
		`SELECT `+templateCols+` FROM template_versions ORDER BY created_at DESC, id DESC`)
}

// ListTemplateVersionsOf implements store.TemplateBuildStore.
func (s *Store) ListTemplateVersionsOf(ctx context.Context, orgID, slug string) ([]store.TemplateVersion, error) {
	q, args := `SELECT `+templateCols+` FROM template_versions WHERE org_id = ?`, []any{orgID}
	if slug != "" {
		q, args = q+` AND slug = ?`, append(args, slug)
	}
	return s.listVersions(ctx, fmt.Sprintf("list template versions of %q", slug), q+` ORDER BY created_at DESC, id DESC`, args...)
}

func (s *Store) listVersions(ctx context.Context, what, q string, args ...any) ([]store.TemplateVersion, error) {
	vs, err := sqldb.All(ctx, s.db, s.db.Decoder().Template, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return vs, nil
}

// DeleteTemplateVersion implements store.TemplateBuildStore.
func (s *Store) DeleteTemplateVersion(ctx context.Context, id string) error {
	return sqldb.Write(ctx, s.db, fmt.Sprintf("delete template version %q", id),
		`DELETE FROM template_versions WHERE id = ?`, id)
}

const buildCols = `id, org_id, slug, status, request, version_id, error, failure, log, box_id, created_at, updated_at, finished_at`

// CreateTemplateBuild implements store.TemplateBuildStore.
func (s *Store) CreateTemplateBuild(ctx context.Context, b store.TemplateBuild) error {
	failure, err := encodeFailure(b)
	if err != nil {
		return fmt.Errorf("create template build %q: %w", b.ID, err)
	}
	t := sqldb.Now()
	created := sqldb.Or(b.CreatedAt, t)
	n, err := s.db.Exec(ctx, `INSERT INTO template_builds (`+buildCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		b.ID, b.OrgID, b.Slug, string(b.Status), b.Request, b.VersionID, b.Error, failure, nonNilBytes(b.Log), b.BoxID,
		s.db.Time(created), s.db.Time(sqldb.Or(b.UpdatedAt, t)), s.d.FinishedAt(b.FinishedAt))
	if err != nil {
		return fmt.Errorf("create template build %q: %w", b.ID, err)
	}
	return sqldb.Inserted(n, "template build", b.ID)
}

// UpdateTemplateBuild implements store.TemplateBuildStore.
func (s *Store) UpdateTemplateBuild(ctx context.Context, b store.TemplateBuild) error {
	failure, err := encodeFailure(b)
	if err != nil {
		return fmt.Errorf("update template build %q: %w", b.ID, err)
	}
	n, err := s.db.Exec(ctx, `UPDATE template_builds SET status = ?, version_id = ?, error = ?, failure = ?,
		log = ?, box_id = ?, updated_at = ?, finished_at = ? WHERE id = ?`,
		string(b.Status), b.VersionID, b.Error, failure, nonNilBytes(b.Log), b.BoxID, s.db.Time(sqldb.Now()),
		s.d.FinishedAt(b.FinishedAt), b.ID)
	if err != nil {
		return fmt.Errorf("update template build %q: %w", b.ID, err)
	}
	return sqldb.Found(n, fmt.Sprintf("template build %q", b.ID))
}

// encodeFailure is a build's failure as stored: JSON, or "" for none.
func encodeFailure(b store.TemplateBuild) (string, error) {
	if b.Failure == nil {
		return "", nil
	}
	f, err := json.Marshal(b.Failure)
	return string(f), err
}

// nonNilBytes stores nil as empty: the columns are NOT NULL.
func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// GetTemplateBuild implements store.TemplateBuildStore.
func (s *Store) GetTemplateBuild(ctx context.Context, orgID, id string) (store.TemplateBuild, error) {
	b, err := sqldb.One(ctx, s.db, s.db.Decoder().Build, "template build", id,
		`SELECT `+buildCols+` FROM template_builds WHERE id = ?`, id)
	if err == nil && orgID != "" && b.OrgID != orgID {
		return store.TemplateBuild{}, fmt.Errorf("template build %q: %w", id, store.ErrNotFound)
	}
	return b, err
}

// ListTemplateBuilds implements store.TemplateBuildStore. It leaves the
// logs out: a list never needs them and they can be large.
func (s *Store) ListTemplateBuilds(ctx context.Context, f store.BuildFilter) ([]store.TemplateBuild, error) {
	q := `SELECT id, org_id, slug, status, request, version_id, error, failure, ` + s.d.EmptyBytes +
		`, box_id, created_at, updated_at, finished_at
		FROM template_builds WHERE 1 = 1`
	var args []any
	for _, c := range []struct{ col, v string }{{"org_id", f.OrgID}, {"slug", f.Slug}, {"status", string(f.Status)}} {
		if c.v != "" {
			q, args = q+` AND `+c.col+` = ?`, append(args, c.v)
		}
	}
	return sqldb.List(ctx, s.db, s.db.Decoder().Build, "list template builds", q+` ORDER BY created_at DESC, id DESC`, args...)
}
