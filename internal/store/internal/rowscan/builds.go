package rowscan

import (
	"encoding/json"
	"fmt"

	"github.com/platinum-dev/platinum/internal/store"
)

// Template reads id, slug, status, progress, rootfs, size_bytes, error,
// created_at, updated_at, org_id, build_id, spec, host_id.
func (d Decoder) Template(r Row) (store.TemplateVersion, error) {
	var v store.TemplateVersion
	var status, spec string
	sc := d.scan()
	if err := sc.row(r, &v.ID, &v.Slug, &status, &v.Progress, &v.RootFS, &v.SizeBytes, &v.Error,
		sc.at(&v.CreatedAt), sc.at(&v.UpdatedAt), &v.OrgID, &v.BuildID, &spec, &v.HostID); err != nil {
		return store.TemplateVersion{}, err
	}
	v.Status = store.TemplateStatus(status)
	if err := json.Unmarshal([]byte(spec), &v.Spec); err != nil {
		return store.TemplateVersion{}, fmt.Errorf("template version %q spec: %w", v.ID, err)
	}
	return v, nil
}

// Build reads id, org_id, slug, status, request, version_id, error,
// failure, log, box_id, created_at, updated_at, finished_at. An empty log
// is nil, an empty failure none.
func (d Decoder) Build(r Row) (store.TemplateBuild, error) {
	var b store.TemplateBuild
	var status, failure string
	sc := d.scan()
	if err := sc.row(r, &b.ID, &b.OrgID, &b.Slug, &status, &b.Request, &b.VersionID, &b.Error, &failure, &b.Log,
		&b.BoxID, sc.at(&b.CreatedAt), sc.at(&b.UpdatedAt), sc.opt(&b.FinishedAt)); err != nil {
		return store.TemplateBuild{}, err
	}
	b.Status = store.BuildStatus(status)
	if len(b.Log) == 0 {
		b.Log = nil
	}
	if failure != "" {
		b.Failure = &store.BuildFailure{}
		if err := json.Unmarshal([]byte(failure), b.Failure); err != nil {
			return store.TemplateBuild{}, fmt.Errorf("template build %q failure: %w", b.ID, err)
		}
	}
	return b, nil
}

// BuildCache reads org_id, key, snapshot_id, ready, created_at, used_at.
func (d Decoder) BuildCache(r Row) (store.BuildCacheEntry, error) {
	return decode(d, r, func(sc *scan, e *store.BuildCacheEntry) []any {
		return []any{&e.OrgID, &e.Key, &e.SnapshotID, &e.Ready, sc.at(&e.CreatedAt), sc.at(&e.UsedAt)}
	})
}

// Credential reads org_id, registry, username, sealed, kind, created_at,
// updated_at.
func (d Decoder) Credential(r Row) (store.RegistryCredential, error) {
	return decode(d, r, func(sc *scan, c *store.RegistryCredential) []any {
		return []any{&c.OrgID, &c.Registry, &c.Username, &c.Sealed, &c.Kind,
			sc.at(&c.CreatedAt), sc.at(&c.UpdatedAt)}
	})
}

// HostCols are the hosts columns Host reads.
const HostCols = `id, region, url, state, generation, capacity, status, reason, registered_at, heartbeat_at, state_changed_at`

// Host reads id, region, url, state, generation, capacity, status,
// reason, registered_at, heartbeat_at, state_changed_at.
func (d Decoder) Host(r Row) (store.HostRecord, error) {
	var h store.HostRecord
	var state, capacity, status string
	sc := d.scan()
	if err := sc.row(r, &h.ID, &h.Region, &h.URL, &state, &h.Generation, &capacity, &status, &h.Reason,
		sc.at(&h.RegisteredAt), sc.at(&h.HeartbeatAt), sc.at(&h.StateChangedAt)); err != nil {
		return store.HostRecord{}, err
	}
	h.State, h.Capacity, h.Status = store.HostState(state), json.RawMessage(capacity), json.RawMessage(status)
	return h, nil
}

// Lease reads name, holder, generation, expires_at.
func (d Decoder) Lease(r Row) (store.Lease, error) {
	return decode(d, r, func(sc *scan, l *store.Lease) []any {
		return []any{&l.Name, &l.Holder, &l.Generation, sc.at(&l.ExpiresAt)}
	})
}

// Webhook reads id, org_id, url, events, secret, cursor, created_at.
func (d Decoder) Webhook(r Row) (store.Webhook, error) {
	var w store.Webhook
	var evs string
	sc := d.scan()
	if err := sc.row(r, &w.ID, &w.OrgID, &w.URL, &evs, &w.Secret, &w.Cursor, sc.at(&w.CreatedAt)); err != nil {
		return store.Webhook{}, err
	}
	if err := json.Unmarshal([]byte(evs), &w.Events); err != nil {
		return store.Webhook{}, fmt.Errorf("webhook %q events: %w", w.ID, err)
	}
	return w, nil
}

// Delivery reads id, webhook_id, org_id, event_id, status, attempts,
// next_attempt_at, last_status, last_error, created_at, updated_at and,
// withEvent, the event's columns as Event reads them.
func (d Decoder) Delivery(withEvent bool) func(Row) (store.Delivery, error) {
	return func(r Row) (store.Delivery, error) {
		var dl store.Delivery
		var status string
		sc := d.scan()
		dest := []any{&dl.ID, &dl.WebhookID, &dl.OrgID, &dl.EventID, &status, &dl.Attempts, sc.at(&dl.NextAttemptAt),
			&dl.LastStatus, &dl.LastError, sc.at(&dl.CreatedAt), sc.at(&dl.UpdatedAt)}
		if withEvent {
			ev := &dl.Event
			dest = append(dest, &ev.ID, &ev.OrgID, &ev.SandboxID, &ev.Type, &ev.Data, sc.at(&ev.CreatedAt))
		}
		if err := sc.row(r, dest...); err != nil {
			return store.Delivery{}, err
		}
		dl.Status = store.DeliveryStatus(status)
		return dl, nil
	}
}

// Artifact reads id, org_id, sandbox_id, name, path, kind, content_type,
// size_bytes, sha256, bucket, key, created_at.
func (d Decoder) Artifact(r Row) (store.Artifact, error) {
	var a store.Artifact
	var kind string
	sc := d.scan()
	if err := sc.row(r, &a.ID, &a.OrgID, &a.SandboxID, &a.Name, &a.Path, &kind, &a.ContentType, &a.SizeBytes,
		&a.SHA256, &a.Bucket, &a.Key, sc.at(&a.CreatedAt)); err != nil {
		return store.Artifact{}, err
	}
	a.Kind = store.ArtifactKind(kind)
	return a, nil
}

// KeyFingerprintCols are the platform_keys columns KeyFingerprint reads.
const KeyFingerprintCols = `name, fingerprint, origin, created_at`

// KeyFingerprint reads name, fingerprint, origin, created_at.
func (d Decoder) KeyFingerprint(r Row) (store.KeyFingerprint, error) {
	return decode(d, r, func(sc *scan, f *store.KeyFingerprint) []any {
		return []any{&f.Name, &f.Fingerprint, &f.Origin, sc.at(&f.CreatedAt)}
	})
}
