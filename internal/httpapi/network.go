package httpapi

import (
	"net/http"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// networkBody is a network policy as the API takes it (create's "network"
// and PATCH /v1/sandboxes/{id}/network).
type networkBody struct {
	Egress   string   `json:"egress"`
	AllowOut []string `json:"allow_out"`
	DenyOut  []string `json:"deny_out"`
}

func (b *networkBody) policy() *sandbox.NetworkPolicy {
	if b == nil {
		return nil
	}
	return &sandbox.NetworkPolicy{Egress: b.Egress, AllowOut: b.AllowOut, DenyOut: b.DenyOut}
}

// viewNetwork is the policy shown on a sandbox: the default spelled out
// when none was set.
func viewNetwork(sb sandbox.Sandbox) sandbox.NetworkPolicy {
	if sb.Network == nil {
		return sandbox.NetworkPolicy{Egress: sandbox.EgressAllow, AllowOut: []string{}, DenyOut: []string{}}
	}
	return *sb.Network
}

// patchNetwork replaces a sandbox's network policy; a running sandbox's
// traffic follows it before the answer.
func (a *API) patchNetwork(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b networkBody
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	res, err := a.cp.SetNetwork(r.Context(), p, r.PathValue("id"), b.policy())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": res.Sandbox.ID, "state": res.Sandbox.State,
		"network": viewNetwork(res.Sandbox), "applies": res.Applies})
	return nil
}
