package httpapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

func (a *API) hosts(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	recs, err := a.cp.HostRecords(r.Context(), p)
	if err != nil {
		return err
	}
	registered := map[string]store.HostRecord{}
	for _, h := range recs {
		registered[h.ID] = h
	}
	pools, err := a.ses.HostPools(r.Context())
	if err != nil {
		return err
	}
	sizing, err := a.poolSizing(r)
	if err != nil {
		return err
	}
	rows := []map[string]any{}
	for _, h := range a.cp.Hosts(r.Context(), p) {
		classes := []map[string]any{}
		for _, c := range h.Classes {
			cl := map[string]any{"name": c.Name, "stop_keeps_memory": c.StopKeepsMemory, "checkpoint": c.Checkpoint}
			if c.CheckpointReason != "" {
				cl["checkpoint_unavailable_reason"] = c.CheckpointReason
			}
			cl["live_resize"] = c.NoLiveResize == ""
			if c.NoLiveResize != "" {
				cl["live_resize_unavailable_reason"] = c.NoLiveResize
			}
			classes = append(classes, cl)
		}
		gpus := []map[string]any{}
		for _, g := range h.GPUs {
			row := map[string]any{"index": g.Index, "model": g.Model, "device": g.Device, "usable": g.Usable()}
			if g.UUID != "" {
				row["uuid"] = g.UUID
			}
			if g.MemoryMB > 0 {
				row["memory_mb"] = g.MemoryMB
			}
			if g.CDIDevice != "" {
				row["cdi_device"] = g.CDIDevice
			}
			gpus = append(gpus, row)
		}
		warm := []map[string]any{}
		for _, hp := range pools[h.ID] {
			wp := map[string]any{"template": hp.Template, "runtime": hp.Runtime, "ready": hp.Ready, "provisioning": hp.Provisioning}
			maps.Copy(wp, sizing[hp.Template+"@"+hp.Runtime])
			warm = append(warm, wp)
		}
		row := map[string]any{"id": h.ID, "runtime_classes": classes, "lxcfs": h.LXCFS, "gpus": gpus, "warm_pools": warm,
			"warm_pool_budget_mb": a.ses.PoolBudgetMB()}
		if h.GPUDriver != "" {
			row["gpu_driver"] = h.GPUDriver
		}
		if h.GPUProblem != "" {
			row["gpu_problem"] = h.GPUProblem
		}
		if rec, ok := registered[h.ID]; ok {
			maps.Copy(row, hostStateView(rec))
			delete(registered, h.ID)
		}
		rows = append(rows, row)
	}
	// Hosts this process does not run show their registration only.
	for _, id := range slices.Sorted(maps.Keys(registered)) {
		rows = append(rows, hostStateView(registered[id]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"rows": rows})
	return nil
}

// hostStateView is a host's registration as the API shows it.
func hostStateView(h store.HostRecord) map[string]any {
	row := map[string]any{"id": h.ID, "state": string(h.State), "generation": h.Generation,
		"registered_at": sandbox.FormatTime(h.RegisteredAt), "heartbeat_at": sandbox.FormatTime(h.HeartbeatAt),
		"capacity": json.RawMessage(h.Capacity), "load": json.RawMessage(h.Status)}
	if h.Reason != "" {
		row["state_reason"] = h.Reason
	}
	if h.Region != "" {
		row["region"] = h.Region
	}
	return row
}

func (a *API) drainHost(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return a.setHostDrain(w, r, p, true)
}

func (a *API) undrainHost(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return a.setHostDrain(w, r, p, false)
}

func (a *API) setHostDrain(w http.ResponseWriter, r *http.Request, p controlplane.Principal, drain bool) error {
	return respond(w, http.StatusOK, hostStateView)(a.cp.DrainHost(r.Context(), p, r.PathValue("id"), drain))
}

// poolSizing is each pool's auto and target (docs/sessions.md,
// "Demand-sized pools") by TEMPLATE@CLASS, for the warm pools a host row
// lists: as this process computes them, the one whose refill and budget
// its host's pools follow.
func (a *API) poolSizing(r *http.Request) (map[string]map[string]any, error) {
	all, err := a.ses.Pools(r.Context(), controlplane.Principal{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]any, len(all))
	for _, ps := range all {
		out[ps.Template+"@"+ps.Runtime] = map[string]any{"auto": ps.Auto, "target": ps.Target}
	}
	return out, nil
}
