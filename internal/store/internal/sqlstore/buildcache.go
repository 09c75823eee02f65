package sqlstore

import (
	"context"
	"fmt"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

const cacheCols = `org_id, key, snapshot_id, ready, created_at, used_at`

// PutBuildCache implements store.TemplateBuildStore.
func (s *Store) PutBuildCache(ctx context.Context, e store.BuildCacheEntry) error {
	t := sqldb.Now()
	return sqldb.Write(ctx, s.db, fmt.Sprintf("put build cache %q", e.Key),
		`INSERT INTO template_build_cache (`+cacheCols+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, key) DO UPDATE SET snapshot_id = excluded.snapshot_id, ready = excluded.ready,
			used_at = excluded.used_at`,
		e.OrgID, e.Key, e.SnapshotID, e.Ready, s.db.Time(sqldb.Or(e.CreatedAt, t)), s.db.Time(sqldb.Or(e.UsedAt, t)))
}

// GetBuildCache implements store.TemplateBuildStore.
func (s *Store) GetBuildCache(ctx context.Context, orgID, key string) (store.BuildCacheEntry, error) {
	return sqldb.One(ctx, s.db, s.db.Decoder().BuildCache, "build cache entry", key,
		`SELECT `+cacheCols+` FROM template_build_cache WHERE org_id = ? AND key = ?`, orgID, key)
}

// ListBuildCache implements store.TemplateBuildStore.
func (s *Store) ListBuildCache(ctx context.Context, orgID string) ([]store.BuildCacheEntry, error) {
	q, args := `SELECT `+cacheCols+` FROM template_build_cache`, []any{}
	if orgID != "" {
		q, args = q+` WHERE org_id = ?`, append(args, orgID)
	}
	return sqldb.List(ctx, s.db, s.db.Decoder().BuildCache, "list build cache", q+` ORDER BY used_at, key`, args...)
}

// DeleteBuildCache implements store.TemplateBuildStore.
func (s *Store) DeleteBuildCache(ctx context.Context, orgID, key string) error {
	return sqldb.Write(ctx, s.db, fmt.Sprintf("delete build cache %q", key),
		`DELETE FROM template_build_cache WHERE org_id = ? AND key = ?`, orgID, key)
}

const credCols = `org_id, registry, username, sealed, kind, created_at, updated_at`

// PutRegistryCredential implements store.TemplateBuildStore.
func (s *Store) PutRegistryCredential(ctx context.Context, c store.RegistryCredential) error {
	t := sqldb.Now()
	return sqldb.Write(ctx, s.db, fmt.Sprintf("put registry credential %q", c.Registry),
		`INSERT INTO registry_credentials (`+credCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, registry) DO UPDATE SET username = excluded.username, sealed = excluded.sealed,
			kind = excluded.kind, updated_at = excluded.updated_at`,
		c.OrgID, c.Registry, c.Username, nonNilBytes(c.Sealed), c.Kind,
		s.db.Time(sqldb.Or(c.CreatedAt, t)), s.db.Time(sqldb.Or(c.UpdatedAt, t)))
}

// GetRegistryCredential implements store.TemplateBuildStore.
func (s *Store) GetRegistryCredential(ctx context.Context, orgID, registry string) (store.RegistryCredential, error) {
	return sqldb.One(ctx, s.db, s.db.Decoder().Credential, "registry credential", registry,
		`SELECT `+credCols+` FROM registry_credentials WHERE org_id = ? AND registry = ?`, orgID, registry)
}

// ListRegistryCredentials implements store.TemplateBuildStore.
func (s *Store) ListRegistryCredentials(ctx context.Context, orgID string) ([]store.RegistryCredential, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().Credential, "list registry credentials",
		`SELECT `+credCols+` FROM registry_credentials WHERE org_id = ? ORDER BY registry`, orgID)
}

// DeleteRegistryCredential implements store.TemplateBuildStore.
func (s *Store) DeleteRegistryCredential(ctx context.Context, orgID, registry string) error {
	return sqldb.DeleteOne(ctx, s.db, fmt.Sprintf("registry credential %q", registry),
		`DELETE FROM registry_credentials WHERE org_id = ? AND registry = ?`, orgID, registry)
}
