// Package codec is how the store implementations keep a sandbox's
// documents: its env and metadata maps and its lifecycle fields, as JSON
// (and, likewise, an event's data). One encoding for every backend, so a
// field added to the record is stored by all of them.
package codec

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// EncodeMaps renders Env and Metadata as JSON objects; nil becomes {}.
func EncodeMaps(sb sandbox.Sandbox) (env, meta string, err error) {
	if env, err = EncodeMap(sb.Env); err != nil {
		return "", "", fmt.Errorf("env: %w", err)
	}
	if meta, err = EncodeMap(sb.Metadata); err != nil {
		return "", "", fmt.Errorf("metadata: %w", err)
	}
	return env, meta, nil
}

// Documents is a sandbox's stored documents.
type Documents struct {
	Env, Meta, Lifecycle string
}

// EncodeSandbox renders all of sb's documents (EncodeMaps, EncodeLifecycle).
func EncodeSandbox(sb sandbox.Sandbox) (Documents, error) {
	env, meta, err := EncodeMaps(sb)
	if err != nil {
		return Documents{}, err
	}
	lc, err := EncodeLifecycle(sb)
	if err != nil {
		return Documents{}, err
	}
	return Documents{Env: env, Meta: meta, Lifecycle: lc}, nil
}

// EncodeMap renders m as a JSON object; nil becomes {}.
func EncodeMap(m map[string]string) (string, error) {
	if m == nil {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// DecodeMaps reads stored Env and Metadata into sb, always as non-nil maps.
func DecodeMaps(env, meta string, sb *sandbox.Sandbox) error {
	sb.Env = map[string]string{}
	if err := json.Unmarshal([]byte(env), &sb.Env); err != nil {
		return fmt.Errorf("sandbox %q: env: %w", sb.ID, err)
	}
	sb.Metadata = map[string]string{}
	if err := json.Unmarshal([]byte(meta), &sb.Metadata); err != nil {
		return fmt.Errorf("sandbox %q: metadata: %w", sb.ID, err)
	}
	// A JSON null would have reset the maps to nil; keep the non-nil promise.
	if sb.Env == nil {
		sb.Env = map[string]string{}
	}
	if sb.Metadata == nil {
		sb.Metadata = map[string]string{}
	}
	return nil
}

// lifecycle is the stored form of the record's lifecycle fields.
type lifecycle struct {
	ExpiresAt      *time.Time                `json:"expires_at,omitempty"`
	ExpiryAction   sandbox.ExpiryAction      `json:"expiry_action,omitempty"`
	TTLMs          int64                     `json:"ttl_ms,omitempty"`
	LastStart      *sandbox.LastStart        `json:"last_start,omitempty"`
	Retention      sandbox.Retention         `json:"retention"`
	LastActivityAt *time.Time                `json:"last_activity_at,omitempty"`
	StoppedAt      *time.Time                `json:"stopped_at,omitempty"`
	StopSnapshot   *sandbox.StopSnapshotRef  `json:"stop_snapshot,omitempty"`
	Archive        *sandbox.ArchiveRef       `json:"archive,omitempty"`
	NoAutoResume   bool                      `json:"no_auto_resume,omitempty"`
	Live           *sandbox.LiveHeadroom     `json:"live,omitempty"`
	Secrets        map[string]sandbox.Secret `json:"secrets,omitempty"`
	APIToken       string                    `json:"api_token,omitempty"`
	Runtime        string                    `json:"runtime,omitempty"`
	SourceSnapshot string                    `json:"source_snapshot,omitempty"`
	RestoreSnap    string                    `json:"restore_snapshot,omitempty"`
	Preview        *sandbox.Preview          `json:"preview,omitempty"`
	Network        *sandbox.NetworkPolicy    `json:"network,omitempty"`
	IdemTag        string                    `json:"idempotency_tag,omitempty"`
	DeletedBy      string                    `json:"deleted_by,omitempty"`
	SSHKeys        []string                  `json:"ssh_keys,omitempty"`
	GPUs           int                       `json:"gpus,omitempty"`
	GPUModel       string                    `json:"gpu_model,omitempty"`
	Start          string                    `json:"start,omitempty"`
}

// EncodeLifecycle renders the record's lifecycle fields (expiry, last
// start, retention timers, activity, archive, …) as one JSON document:
// they are read with the record and filtered in the control plane, never
// by SQL.
func EncodeLifecycle(sb sandbox.Sandbox) (string, error) {
	b, err := json.Marshal(lifecycle{
		ExpiresAt: sb.ExpiresAt, ExpiryAction: sb.ExpiryAction, TTLMs: sb.TTLMs, LastStart: sb.LastStart,
		Retention: sb.Retention, LastActivityAt: sb.LastActivityAt, StoppedAt: sb.StoppedAt, StopSnapshot: sb.StopSnapshot, Archive: sb.Archive,
		NoAutoResume: sb.NoAutoResume, Live: sb.Live, Secrets: sb.Secrets, APIToken: sb.APIToken,
		Runtime: sb.Runtime, Preview: sb.Preview, Network: sb.Network,
		SourceSnapshot: sb.SourceSnapshotID, RestoreSnap: sb.RestoreSnapshotID,
		IdemTag: sb.IdempotencyTag, DeletedBy: sb.DeletedBy, SSHKeys: sb.SSHKeys,
		GPUs: sb.GPUs, GPUModel: sb.GPUModel, Start: sb.Start,
	})
	if err != nil {
		return "", fmt.Errorf("lifecycle: %w", err)
	}
	return string(b), nil
}

// DecodeLifecycle reads a stored lifecycle document into sb.
func DecodeLifecycle(s string, sb *sandbox.Sandbox) error {
	var lc lifecycle
	if err := json.Unmarshal([]byte(s), &lc); err != nil {
		return fmt.Errorf("lifecycle: %w", err)
	}
	sb.ExpiresAt, sb.ExpiryAction, sb.LastStart = lc.ExpiresAt, lc.ExpiryAction, lc.LastStart
	sb.TTLMs = lc.TTLMs
	sb.Retention, sb.LastActivityAt, sb.StoppedAt, sb.Archive = lc.Retention, lc.LastActivityAt, lc.StoppedAt, lc.Archive
	sb.StopSnapshot = lc.StopSnapshot
	sb.NoAutoResume, sb.Live, sb.Secrets, sb.APIToken = lc.NoAutoResume, lc.Live, lc.Secrets, lc.APIToken
	sb.Runtime, sb.Preview = lc.Runtime, lc.Preview
	sb.SourceSnapshotID, sb.RestoreSnapshotID = lc.SourceSnapshot, lc.RestoreSnap
	sb.Network = lc.Network
	sb.IdempotencyTag, sb.DeletedBy = lc.IdemTag, lc.DeletedBy
	sb.SSHKeys = lc.SSHKeys
	sb.GPUs, sb.GPUModel = lc.GPUs, lc.GPUModel
	sb.Start = lc.Start
	return nil
}

// EventData renders an event's data as its stored JSON document; nil
// becomes {}.
func EventData(data any) (string, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return "", err
	}
	if data == nil {
		return "{}", nil
	}
	return string(b), nil
}

// Doc is a JSON document as stored: empty means {}.
func Doc(b json.RawMessage) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

// EncodeObjects renders a ledger entry's object refs as stored; nil is [].
func EncodeObjects(refs []store.ObjectRef) (string, error) {
	if refs == nil {
		refs = []store.ObjectRef{}
	}
	b, err := json.Marshal(refs)
	return string(b), err
}
