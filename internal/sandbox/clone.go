package sandbox

import (
	"maps"
	"slices"
)

// Clone returns a deep copy of sb: no map, slice or pointer of the copy is
// shared with sb, so a caller may change either freely. The SQLite store
// hands out clones of the records it keeps in memory (store/sqlite's read
// cache); TestCloneSharesNothing fails when a field is added that Clone
// does not copy deeply.
func (sb Sandbox) Clone() Sandbox {
	out := sb
	out.Env = maps.Clone(sb.Env)
	out.Metadata = maps.Clone(sb.Metadata)
	out.ExpiresAt = clonePtr(sb.ExpiresAt)
	out.LastStart = clonePtr(sb.LastStart)
	out.LastActivityAt = clonePtr(sb.LastActivityAt)
	out.StoppedAt = clonePtr(sb.StoppedAt)
	out.StopSnapshot = clonePtr(sb.StopSnapshot)
	out.DeletedAt = clonePtr(sb.DeletedAt)
	out.Progress = clonePtr(sb.Progress)
	out.Live = clonePtr(sb.Live)
	out.Archive = clonePtr(sb.Archive)
	out.SSHKeys = slices.Clone(sb.SSHKeys)
	if sb.Secrets != nil {
		out.Secrets = make(map[string]Secret, len(sb.Secrets))
		for k, v := range sb.Secrets {
			v.Hosts = slices.Clone(v.Hosts)
			out.Secrets[k] = v
		}
	}
	if sb.Network != nil {
		n := *sb.Network
		n.AllowOut, n.DenyOut = slices.Clone(n.AllowOut), slices.Clone(n.DenyOut)
		out.Network = &n
	}
	if sb.Preview != nil {
		p := *sb.Preview
		p.Public, p.Gen = slices.Clone(p.Public), maps.Clone(p.Gen)
		out.Preview = &p
	}
	return out
}

// clonePtr copies what p points at (values without pointers inside).
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
