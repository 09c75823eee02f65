package rowscan

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/codec"
)

// Each decoder reads the columns of its table's column list, in order;
// the stores name those lists in their queries.

// SandboxCols are the sandboxes columns Sandbox reads.
const SandboxCols = `id, org_id, name, state, template, template_version_id, cpu, ram_mb, disk_gb,
	env, metadata, host_id, address, agent_token, reason, version, created_at, updated_at, deleted_at, lifecycle, parent_id,
	project_id`

// Sandbox reads the SandboxCols.
func (d Decoder) Sandbox(r Row) (sandbox.Sandbox, error) {
	var sb sandbox.Sandbox
	var state, env, meta, lc string
	sc := d.scan()
	if err := sc.row(r, &sb.ID, &sb.OrgID, &sb.Name, &state, &sb.Template, &sb.TemplateVersionID,
		&sb.CPU, &sb.RAMMB, &sb.DiskGB, &env, &meta, &sb.HostID, &sb.Address, &sb.AgentToken,
		&sb.Reason, &sb.Version, sc.at(&sb.CreatedAt), sc.at(&sb.UpdatedAt), sc.opt(&sb.DeletedAt), &lc,
		&sb.ParentID, &sb.ProjectID); err != nil {
		return sandbox.Sandbox{}, err
	}
	sb.State = sandbox.State(state)
	if err := codec.DecodeLifecycle(lc, &sb); err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", sb.ID, err)
	}
	if err := codec.DecodeMaps(env, meta, &sb); err != nil {
		return sandbox.Sandbox{}, err
	}
	return sb, nil
}

// Event reads id, org_id, sandbox_id, type, data, created_at.
func (d Decoder) Event(r Row) (store.Event, error) {
	return decode(d, r, func(sc *scan, e *store.Event) []any {
		return []any{&e.ID, &e.OrgID, &e.SandboxID, &e.Type, &e.Data, sc.at(&e.CreatedAt)}
	})
}

// Session reads id, org_id, vault_id, workflow_id, agent_session_id,
// template, sandbox_id, status, reason, warm, version, created_at,
// updated_at, ready_at, ended_at.
func (d Decoder) Session(r Row) (store.Session, error) {
	var ses store.Session
	var status string
	sc := d.scan()
	if err := sc.row(r, &ses.ID, &ses.OrgID, &ses.VaultID, &ses.WorkflowID, &ses.AgentSessionID, &ses.Template,
		&ses.SandboxID, &status, &ses.Reason, &ses.Warm, &ses.Version, sc.at(&ses.CreatedAt), sc.at(&ses.UpdatedAt),
		sc.opt(&ses.ReadyAt), sc.opt(&ses.EndedAt)); err != nil {
		return store.Session{}, err
	}
	ses.Status = store.SessionStatus(status)
	return ses, nil
}

// Snapshot reads id, org_id, sandbox_id, name, kind, state, memory,
// size_bytes, source, host_id, disk_image, memory_image, bucket,
// manifest_key, reason, created_at, updated_at.
func (d Decoder) Snapshot(r Row) (sandbox.Snapshot, error) {
	var sn sandbox.Snapshot
	var kind, state, src string
	sc := d.scan()
	if err := sc.row(r, &sn.ID, &sn.OrgID, &sn.SandboxID, &sn.Name, &kind, &state, &sn.Memory, &sn.SizeBytes, &src,
		&sn.HostID, &sn.DiskImage, &sn.MemoryImage, &sn.Bucket, &sn.ManifestKey, &sn.Reason,
		sc.at(&sn.CreatedAt), sc.at(&sn.UpdatedAt)); err != nil {
		return sandbox.Snapshot{}, err
	}
	sn.Kind, sn.State = sandbox.SnapshotKind(kind), sandbox.SnapshotState(state)
	if err := json.Unmarshal([]byte(src), &sn.Source); err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("snapshot %q source: %w", sn.ID, err)
	}
	return sn, nil
}

// Idempotency reads scope, key, request_hash, claim, done, status,
// header, body, created_at, locked_until, expires_at.
func (d Decoder) Idempotency(r Row) (store.IdempotencyRecord, error) {
	var rec store.IdempotencyRecord
	var header string
	sc := d.scan()
	if err := sc.row(r, &rec.Scope, &rec.Key, &rec.RequestHash, &rec.Claim, &rec.Done, &rec.Status, &header, &rec.Body,
		sc.at(&rec.CreatedAt), sc.at(&rec.LockedUntil), sc.at(&rec.ExpiresAt)); err != nil {
		return store.IdempotencyRecord{}, err
	}
	if err := json.Unmarshal([]byte(header), &rec.Header); err != nil {
		return store.IdempotencyRecord{}, fmt.Errorf("idempotency key header: %w", err)
	}
	return rec, nil
}

// Project reads id, org_id, name, is_default, created_at.
func (d Decoder) Project(r Row) (store.Project, error) {
	return decode(d, r, func(sc *scan, p *store.Project) []any {
		return []any{&p.ID, &p.OrgID, &p.Name, &p.Default, sc.at(&p.CreatedAt)}
	})
}

// Org reads id, name, created_at.
func (d Decoder) Org(r Row) (store.Org, error) {
	return decode(d, r, func(sc *scan, o *store.Org) []any {
		return []any{&o.ID, &o.Name, sc.at(&o.CreatedAt)}
	})
}

// Pool reads template, runtime, min_ready, max, auto, updated_at.
func (d Decoder) Pool(r Row) (store.Pool, error) {
	return decode(d, r, func(sc *scan, p *store.Pool) []any {
		return []any{&p.Template, &p.Runtime, &p.MinReady, &p.Max, &p.Auto, sc.at(&p.UpdatedAt)}
	})
}

// LedgerEntry reads id, org_id, sandbox_id, deleted_reason, deleted_by,
// purged_at, objects, snapshot_bucket.
func (d Decoder) LedgerEntry(r Row) (store.LedgerEntry, error) {
	var l store.LedgerEntry
	var objs string
	sc := d.scan()
	if err := sc.row(r, &l.ID, &l.OrgID, &l.SandboxID, &l.DeletedReason, &l.DeletedBy, sc.at(&l.PurgedAt),
		&objs, &l.SnapshotBucket); err != nil {
		return store.LedgerEntry{}, err
	}
	if err := json.Unmarshal([]byte(objs), &l.Objects); err != nil {
		return store.LedgerEntry{}, err
	}
	return l, nil
}

// ObjectDeletion reads id, bucket, key, kind, queued_at, attempts.
func (d Decoder) ObjectDeletion(r Row) (store.ObjectDeletion, error) {
	return decode(d, r, func(sc *scan, o *store.ObjectDeletion) []any {
		return []any{&o.ID, &o.Ref.Bucket, &o.Ref.Key, &o.Ref.Kind, sc.at(&o.QueuedAt), &o.Attempts}
	})
}

// PoolClaim reads id, template, runtime, claimed_at, warm, handing_over.
func (d Decoder) PoolClaim(r Row) (store.PoolClaim, error) {
	return decode(d, r, func(sc *scan, c *store.PoolClaim) []any {
		return []any{&c.ID, &c.Template, &c.Runtime, sc.at(&c.At), &c.Warm, &c.HandingOver}
	})
}

// PoolBoot reads template, runtime, booted_at, took_us.
func (d Decoder) PoolBoot(r Row) (store.PoolBoot, error) {
	var us int64
	b, err := decode(d, r, func(sc *scan, b *store.PoolBoot) []any {
		return []any{&b.Template, &b.Runtime, sc.at(&b.At), &us}
	})
	b.Took = time.Duration(us) * time.Microsecond
	return b, err
}
