package sandbox

import "slices"

// Preview is a sandbox's preview-URL settings (docs/preview-and-network.md): which
// ports answer without a token, and the generation every token of a port
// must carry. Revoking a port's URLs bumps its generation, so tokens
// signed before stop working at once without a list of revoked tokens.
type Preview struct {
	// Public lists the ports anyone may reach through the preview proxy
	// without a token, sorted.
	Public []int `json:"public,omitempty"`
	// Gen is, per port, the generation its tokens were signed with; a
	// missing port is generation 0.
	Gen map[int]int64 `json:"gen,omitempty"`
}

// IsPublic reports whether port answers without a token.
func (p *Preview) IsPublic(port int) bool {
	return p != nil && slices.Contains(p.Public, port)
}

// Generation returns the generation tokens for port must carry.
func (p *Preview) Generation(port int) int64 {
	if p == nil {
		return 0
	}
	return p.Gen[port]
}

// MinPreviewPort and MaxPreviewPort bound the ports a preview URL can
// name.
const (
	MinPreviewPort = 1
	MaxPreviewPort = 65535
)
