package httpapi

import (
	"math"
	"net/http"

	"github.com/platinum-dev/platinum/internal/controlplane"
)

func (a *API) resize(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b struct {
		CPU    *float64 `json:"cpu"`
		RAMMB  *int     `json:"ram_mb"`
		DiskGB *int     `json:"disk_gb"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	res, err := a.cp.Resize(r.Context(), p, r.PathValue("id"), controlplane.ResizeRequest{CPU: b.CPU, RAMMB: b.RAMMB, DiskGB: b.DiskGB})
	if err != nil {
		return err
	}
	sb := res.Sandbox
	requested := map[string]any{}
	if b.CPU != nil {
		requested["cpu"] = *b.CPU
	}
	if b.RAMMB != nil {
		requested["ram_mb"] = *b.RAMMB
	}
	if b.DiskGB != nil {
		requested["disk_gb"] = *b.DiskGB
	}
	out := map[string]any{
		"id": sb.ID, "state": sb.State, "cpu": sb.CPU, "ram_mb": sb.RAMMB, "disk_gb": sb.DiskGB,
		"applies_at": res.AppliesAt, "requested": requested, "partial": res.Partial,
	}
	if l := sb.Live; l != nil && res.AppliesAt == "now" {
		// What the sandbox's cgroup grants: whole CPUs of quota and the
		// memory limit.
		out["live"] = map[string]any{"max_cpu": l.MaxCPU, "max_ram_mb": l.MaxRAMMB,
			"guest_cpus_online": int(math.Ceil(sb.CPU)), "guest_mem_total_mb": sb.RAMMB}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
