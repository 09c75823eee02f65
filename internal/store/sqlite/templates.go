package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/platinum-dev/platinum/internal/store"
)

const templateCols = `id, slug, status, progress, rootfs, size_bytes, error, created_at, updated_at`

// PutTemplateVersion inserts v, or replaces the version with its ID while
// keeping the stored CreatedAt. Zero times mean now.
func (s *Store) PutTemplateVersion(ctx context.Context, v store.TemplateVersion) error {
	t := now()
	_, err := s.w.ExecContext(ctx, `INSERT INTO template_versions (`+templateCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			slug = excluded.slug,
			status = excluded.status,
			progress = excluded.progress,
			rootfs = excluded.rootfs,
			size_bytes = excluded.size_bytes,
			error = excluded.error,
			updated_at = excluded.updated_at`,
		v.ID, v.Slug, string(v.Status), v.Progress, v.RootFS, v.SizeBytes, v.Error,
		formatTime(v.CreatedAt, t), formatTime(v.UpdatedAt, t))
	if err != nil {
		return fmt.Errorf("put template version %q: %w", v.ID, err)
	}
	return nil
}

// GetTemplateVersion returns the version with that ID; ErrNotFound if absent.
func (s *Store) GetTemplateVersion(ctx context.Context, id string) (store.TemplateVersion, error) {
	return getOne(s.r.QueryRowContext(ctx,
		`SELECT `+templateCols+` FROM template_versions WHERE id = ?`, id), scanTemplate, "template version", id)
}

// LatestTemplateVersion returns slug's newest version in any status;
// ErrNotFound if it has none.
func (s *Store) LatestTemplateVersion(ctx context.Context, slug string) (store.TemplateVersion, error) {
	v, err := scanTemplate(s.r.QueryRowContext(ctx,
		`SELECT `+templateCols+` FROM template_versions WHERE slug = ?
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
	vs, err := queryAll(ctx, s.r, scanTemplate,
		`SELECT `+templateCols+` FROM template_versions ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list template versions: %w", err)
	}
	return vs, nil
}

func scanTemplate(sc scanner) (store.TemplateVersion, error) {
	var v store.TemplateVersion
	var status, created, updated string
	if err := sc.Scan(&v.ID, &v.Slug, &status, &v.Progress, &v.RootFS, &v.SizeBytes, &v.Error,
		&created, &updated); err != nil {
		return store.TemplateVersion{}, err
	}
	v.Status = store.TemplateStatus(status)
	var err error
	if v.CreatedAt, err = parseTime(created); err != nil {
		return store.TemplateVersion{}, err
	}
	if v.UpdatedAt, err = parseTime(updated); err != nil {
		return store.TemplateVersion{}, err
	}
	return v, nil
}
