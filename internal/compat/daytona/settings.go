package daytona

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// The sandbox settings the 0.218 SDK can change after create: TTL,
// public, network.

// setTTL is POST /sandbox/{id}/ttl/{ttlMinutes} (sandbox.setTtl): the
// sandbox is deleted ttlMinutes from now, whatever its state; 0 removes
// the cap. The DTO shows it as autoDestroyAt.
func (h *Handler) setTTL(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	n, err := strconv.Atoi(r.PathValue("ttl"))
	if err != nil || n < 0 {
		return badRequest("ttlMinutes must be a non-negative integer number of minutes")
	}
	ctx := r.Context()
	sb, err := h.lookup(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	var at time.Time
	if n > 0 {
		at = time.Now().Add(time.Duration(n) * time.Minute)
	}
	if _, err := h.cp.SetExpiry(ctx, p, sb.ID, at, sandbox.ExpireDelete); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// setPublic is POST /sandbox/{id}/public/{isPublic}: true makes the
// ports whose preview URL is asked for answer without a token (as a
// create's public: true); false makes every public port private again
// (its tokens keep working).
func (h *Handler) setPublic(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	public, err := strconv.ParseBool(r.PathValue("public"))
	if err != nil {
		return badRequest("isPublic must be true or false")
	}
	ctx := r.Context()
	sb, err := h.lookup(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	sb, err = h.editMetadata(ctx, p, sb, func(md map[string]string) {
		delete(md, labelPublic)
		if public {
			md[labelPublic] = "true"
		}
	})
	if err != nil {
		return err
	}
	if !public && sb.Preview != nil {
		for _, port := range sb.Preview.Public {
			if _, err := h.cp.SetPreviewPublic(ctx, p, sb.ID, port, false); err != nil {
				return err
			}
		}
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// networkSettings is POST /sandbox/{id}/network-settings {networkBlockAll?,
// networkAllowList?, domainAllowList?} (sandbox.updateNetworkSettings):
// the fields given replace the current ones, the others stay; the policy
// applies at once to a started sandbox, else at its next start. Answers
// the sandbox.
func (h *Handler) networkSettings(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req struct {
		NetworkBlockAll  *bool   `json:"networkBlockAll"`
		NetworkAllowList *string `json:"networkAllowList"`
		DomainAllowList  *string `json:"domainAllowList"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	sb, err := h.lookup(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	cur := h.view(r, sb)
	c := createSandbox{NetworkBlockAll: cur.NetworkBlockAll}
	if cur.NetworkAllowList != nil {
		c.NetworkAllowList = *cur.NetworkAllowList
	}
	if cur.DomainAllowList != nil {
		c.DomainAllowList = *cur.DomainAllowList
	}
	if req.NetworkBlockAll != nil {
		c.NetworkBlockAll = *req.NetworkBlockAll
	}
	if req.NetworkAllowList != nil {
		c.NetworkAllowList = *req.NetworkAllowList
	}
	if req.DomainAllowList != nil {
		c.DomainAllowList = *req.DomainAllowList
	}
	if err := c.validNetwork(); err != nil {
		return err
	}
	res, err := h.cp.SetNetwork(ctx, p, sb.ID, c.network())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.view(r, res.Sandbox))
	return nil
}

// validNetwork checks the allow lists as Daytona does: at most 10 entries
// each, CIDRs with their prefix length.
func (c *createSandbox) validNetwork() error {
	for _, l := range []struct{ name, list string }{{"networkAllowList", c.NetworkAllowList}, {"domainAllowList", c.DomainAllowList}} {
		n := 0
		for _, v := range strings.Split(l.list, ",") {
			if v = strings.TrimSpace(v); v == "" {
				continue
			}
			n++
			if l.name == "networkAllowList" && !strings.Contains(v, "/") {
				return badRequest("networkAllowList: %q needs a prefix length (e.g. %s/32)", v, v)
			}
		}
		if n > 10 {
			return badRequest("%s has %d entries; at most 10", l.name, n)
		}
	}
	return nil
}

// editMetadata stores sb's metadata with edit applied to a copy (the
// sandbox's own map may be shared with whoever else read it) and returns
// the sandbox as updated. Daytona keeps its per-sandbox settings (public,
// the signing key's generation) in hidden labels.
func (h *Handler) editMetadata(ctx context.Context, p controlplane.Principal, sb sandbox.Sandbox, edit func(md map[string]string)) (sandbox.Sandbox, error) {
	md := map[string]string{}
	for k, v := range sb.Metadata {
		md[k] = v
	}
	edit(md)
	return h.cp.Update(ctx, p, sb.ID, controlplane.Patch{Metadata: &md})
}
