package httpapi

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// A sandbox is the answer of the hottest route, GET /v1/sandboxes/{id},
// and encoding/json's reflection over its forty fields was the largest
// part of that route's own cost (bench/README.md, "API throughput"). So
// sandboxView writes itself: the same bytes json.Encoder writes (fields
// in declaration order, omitempty as tagged, HTML escaping, map keys
// sorted), which TestSandboxViewJSON checks against encoding/json over
// randomly filled views, every field included, so a field added to the
// struct and not here fails it. A value encoding/json would refuse or
// spell differently (a float that is not finite or needs an exponent)
// makes appendJSON report !ok, and writeJSON encodes with encoding/json.
// A faster JSON library was measured first: github.com/goccy/go-json
// encoded a view in 1.9 µs against encoding/json's 2.6 µs and this
// encoder's 0.7 µs, and wrote control characters differently (\u0008 for
// \b), changing bytes clients see.

// jsonAppender is a value that can append its own JSON (writeJSON).
type jsonAppender interface {
	// appendJSON appends the value's JSON to b; !ok means use
	// encoding/json instead (b is then unspecified).
	appendJSON(b []byte) (out []byte, ok bool)
}

func (v sandboxView) appendJSON(b []byte) ([]byte, bool) {
	ok := true
	b = append(b, `{"id":`...)
	b = appendJSONString(b, v.ID)
	b = append(b, `,"name":`...)
	b = appendJSONStringPtr(b, v.Name)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(v.State))
	b = append(b, `,"template":`...)
	b = appendJSONString(b, v.Template)
	b = append(b, `,"template_version_id":`...)
	b = appendJSONStringPtr(b, v.TemplateVersionID)
	b = append(b, `,"cpu":`...)
	b, ok = appendJSONFloat(b, v.CPU)
	if !ok {
		return b, false
	}
	b = append(b, `,"ram_mb":`...)
	b = strconv.AppendInt(b, int64(v.RAMMB), 10)
	b = append(b, `,"disk_gb":`...)
	b = strconv.AppendInt(b, int64(v.DiskGB), 10)
	b = append(b, `,"env_keys":`...)
	b = appendJSONStrings(b, v.EnvKeys)
	b = append(b, `,"secret_names":`...)
	b = appendJSONStrings(b, v.SecretNames)
	b = append(b, `,"metadata":`...)
	b = appendJSONStringMap(b, v.Metadata)
	if v.HostID != "" {
		b = append(b, `,"host_id":`...)
		b = appendJSONString(b, v.HostID)
	}
	b = append(b, `,"runtime":`...)
	b = appendJSONString(b, v.Runtime)
	b = append(b, `,"parent_id":`...)
	b = appendJSONStringPtr(b, v.ParentID)
	b = append(b, `,"project_id":`...)
	b = appendJSONString(b, v.ProjectID)
	b = append(b, `,"auto_resume":`...)
	b = strconv.AppendBool(b, v.AutoResume)
	b = append(b, `,"ssh_key_fingerprints":`...)
	b = appendJSONStrings(b, v.SSHKeyFingerprints)
	b = append(b, `,"gpus":`...)
	b = strconv.AppendInt(b, int64(v.GPUs), 10)
	if v.GPUModel != "" {
		b = append(b, `,"gpu_model":`...)
		b = appendJSONString(b, v.GPUModel)
	}
	if v.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, v.Reason)
	}
	b = append(b, `,"created_at":`...)
	b = appendJSONString(b, v.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendJSONString(b, v.UpdatedAt)
	b = append(b, `,"deleted_at":`...)
	b = appendJSONStringPtr(b, v.DeletedAt)
	if v.DeletedReason != "" {
		b = append(b, `,"deleted_reason":`...)
		b = appendJSONString(b, v.DeletedReason)
	}
	b = append(b, `,"type":`...)
	b = appendJSONString(b, v.Type)
	b = append(b, `,"auto_stop_minutes":`...)
	b = strconv.AppendInt(b, int64(v.AutoStopMinutes), 10)
	b = append(b, `,"auto_archive_days":`...)
	b = strconv.AppendInt(b, int64(v.AutoArchiveDays), 10)
	b = append(b, `,"auto_delete_days":`...)
	b = strconv.AppendInt(b, int64(v.AutoDeleteDays), 10)
	b = append(b, `,"expires_at":`...)
	b = appendJSONStringPtr(b, v.ExpiresAt)
	if v.Restore != nil {
		b = append(b, `,"restore":`...)
		b = appendJSONString(b, *v.Restore)
	}
	if v.RAMRestored != nil {
		b = append(b, `,"ram_restored":`...)
		b = strconv.AppendBool(b, *v.RAMRestored)
	}
	if v.WaitTimedOut != nil {
		b = append(b, `,"wait_timed_out":`...)
		b = strconv.AppendBool(b, *v.WaitTimedOut)
	}
	if v.Code != "" {
		b = append(b, `,"code":`...)
		b = appendJSONString(b, v.Code)
	}
	if v.Start != "" {
		b = append(b, `,"start":`...)
		b = appendJSONString(b, v.Start)
	}
	if v.StartsOn != "" {
		b = append(b, `,"starts_on":`...)
		b = appendJSONString(b, v.StartsOn)
	}
	if p := v.Progress; p != nil {
		b = appendProgressJSON(append(b, `,"progress":`...), p)
	}
	b = appendNetworkJSON(append(b, `,"network":`...), &v.Network)
	if v.SourceSnapshotID != "" {
		b = append(b, `,"source_snapshot_id":`...)
		b = appendJSONString(b, v.SourceSnapshotID)
	}
	if v.CreatedAtList != "" {
		b = append(b, `,"createdAt":`...)
		b = appendJSONString(b, v.CreatedAtList)
	}
	if v.Region != "" {
		b = append(b, `,"region":`...)
		b = appendJSONString(b, v.Region)
	}
	t := &v.ttlFields
	b = append(b, `,"org_id":`...)
	b = appendJSONString(b, t.OrgID)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(t.Status))
	b = append(b, `,"ttl_ms":`...)
	if t.TTLMs == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *t.TTLMs, 10)
	}
	b = append(b, `,"template_id":`...)
	b = appendJSONString(b, t.TemplateID)
	b = append(b, `,"template_slug":`...)
	b = appendJSONString(b, t.TemplateSlug)
	b = append(b, `,"template_version":`...)
	if t.TemplateVersion == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*t.TemplateVersion), 10)
	}
	if t.DestroyedAt != nil {
		b = append(b, `,"destroyed_at":`...)
		b = appendJSONString(b, *t.DestroyedAt)
	}
	if t.DestroyedReason != "" {
		b = append(b, `,"destroyed_reason":`...)
		b = appendJSONString(b, t.DestroyedReason)
	}
	return append(b, '}'), true
}

func appendProgressJSON(b []byte, p *sandbox.Progress) []byte {
	b = append(b, `{"op":`...)
	b = appendJSONString(b, p.Op)
	b = append(b, `,"done_bytes":`...)
	b = strconv.AppendInt(b, p.DoneBytes, 10)
	b = append(b, `,"total_bytes":`...)
	b = strconv.AppendInt(b, p.TotalBytes, 10)
	return append(b, '}')
}

func appendNetworkJSON(b []byte, n *sandbox.NetworkPolicy) []byte {
	b = append(b, `{"egress":`...)
	b = appendJSONString(b, n.Egress)
	b = append(b, `,"allow_out":`...)
	b = appendJSONStrings(b, n.AllowOut)
	b = append(b, `,"deny_out":`...)
	b = appendJSONStrings(b, n.DenyOut)
	return append(b, '}')
}

// appendJSONFloat is encoding/json's float64 where it uses no exponent
// (0, and magnitudes from 1e-6 up to 1e21); elsewhere !ok.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) || math.IsNaN(f) {
		return b, false
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64), true
}

func appendJSONStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *s)
}

func appendJSONStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONStringMap writes m with its keys sorted, as encoding/json.
func appendJSONStringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	if len(m) == 0 {
		return append(b, "{}"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	return append(b, '}')
}

// jsonSafe marks the ASCII bytes encoding/json writes as they are with
// HTML escaping on: printable, and not '"', '\\', '<', '>' or '&'.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendJSONString is encoding/json's string encoding with HTML escaping:
// '"' and '\\' and the control characters with short forms escaped
// short, other control characters and '<', '>', '&' as \u00XX, invalid
// UTF-8 as \ufffd, U+2028 and U+2029 as \u2028 and \u2029.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
