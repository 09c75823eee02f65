package httpapi

import (
	"math"
	"net/http"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
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
		live := map[string]any{"max_cpu": l.MaxCPU, "max_ram_mb": l.MaxRAMMB,
			"guest_cpus_online": int(math.Ceil(sb.CPU)), "guest_mem_total_mb": sb.RAMMB}
		if g := res.Guest; g != nil {
			// What the guest itself sees (nproc, MemTotal).
			live["guest_cpus_online"], live["guest_mem_total_mb"] = g.CPUsOnline, g.MemTotalMB
		}
		out["live"] = live
	}
	status := http.StatusOK
	if res.AppliesAt == "pending" {
		status = http.StatusAccepted // the host has not finished: read the sandbox for its size
	}
	writeJSON(w, status, out)
	return nil
}

func (a *API) metrics(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	m, err := a.cp.Metrics(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"cpu_percent": m.CPUPercent, "memory_used_bytes": m.MemoryUsedBytes, "memory_limit_bytes": m.MemoryLimitBytes,
		"disk_used_bytes": m.DiskUsedBytes, "disk_size_bytes": m.DiskSizeBytes,
		"net_rx_bytes": m.NetRxBytes, "net_tx_bytes": m.NetTxBytes, "pids": m.Pids, "at": sandbox.FormatTime(m.At),
	})
	return nil
}

func (a *API) usage(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var from, to time.Time
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"from", &from}, {"to", &to}} {
		if v := r.URL.Query().Get(f.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return badRequest(f.name+" must be an RFC 3339 time, e.g. 2026-11-01T00:00:00Z", f.name)
			}
			*f.dst = t.UTC()
		}
	}
	if !from.IsZero() && !to.IsZero() && !to.After(from) {
		return badRequest("to must be after from", "to")
	}
	u, err := a.cp.Usage(r.Context(), p, r.PathValue("id"), from, to)
	if err != nil {
		return err
	}
	periods := make([]map[string]any, 0, len(u.Periods))
	for _, pr := range u.Periods {
		periods = append(periods, map[string]any{"state": pr.State, "from": sandbox.FormatTime(pr.From), "to": sandbox.FormatTime(pr.To),
			"cpu": pr.CPU, "ram_mb": pr.RAMMB, "disk_gb": pr.DiskGB})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": r.PathValue("id"), "from": sandbox.FormatTime(u.From), "to": sandbox.FormatTime(u.To),
		"cpu_seconds": u.CPUSeconds, "ram_gb_seconds": u.RAMGBSeconds, "storage_gb_hours": u.StorageGBHours, "periods": periods,
	})
	return nil
}
