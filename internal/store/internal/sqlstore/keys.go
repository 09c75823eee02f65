package sqlstore

import (
	"context"
	"fmt"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/rowscan"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// RecordKeyFingerprint records f unless its name is recorded; see
// store.ClusterStore. The insert does nothing on a conflict (both
// dialects), so of two ptds starting together one records and both read
// back its record.
func (s *Store) RecordKeyFingerprint(ctx context.Context, f store.KeyFingerprint) (store.KeyFingerprint, error) {
	if f.Name == "" || f.Fingerprint == "" {
		return store.KeyFingerprint{}, fmt.Errorf("record key fingerprint: name and fingerprint are required: %w", sandbox.ErrInvalidArgument)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO platform_keys (`+rowscan.KeyFingerprintCols+`) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO NOTHING`, f.Name, f.Fingerprint, f.Origin, s.db.Time(sqldb.Now())); err != nil {
		return store.KeyFingerprint{}, s.db.Err(fmt.Sprintf("record key fingerprint %q", f.Name), err)
	}
	return s.GetKeyFingerprint(ctx, f.Name)
}

// GetKeyFingerprint returns ErrNotFound if none is recorded as name.
func (s *Store) GetKeyFingerprint(ctx context.Context, name string) (store.KeyFingerprint, error) {
	return sqldb.One(ctx, s.db, s.db.Decoder().KeyFingerprint, "key fingerprint", name,
		`SELECT `+rowscan.KeyFingerprintCols+` FROM platform_keys WHERE name = ?`, name)
}
