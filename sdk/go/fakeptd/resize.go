package fakeptd

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// period is a stretch of one state and size, the unit of usage.
type period struct {
	state  string
	from   time.Time
	cpu    float64
	ram    int
	diskGB int
}

// track starts a new usage period at when sb's state or size changed.
// Callers hold mu.
func (s *Server) track(sb *Sandbox, at time.Time) {
	if n := len(sb.periods); n > 0 {
		l := sb.periods[n-1]
		if l.state == sb.State && l.cpu == sb.CPU && l.ram == sb.RAMMB && l.diskGB == sb.DiskGB {
			return
		}
	}
	sb.periods = append(sb.periods, period{state: sb.State, from: at, cpu: sb.CPU, ram: sb.RAMMB, diskGB: sb.DiskGB})
}

type resizeBody struct {
	CPU    *float64 `json:"cpu,omitempty"`
	RAMMB  *int     `json:"ram_mb,omitempty"`
	DiskGB *int     `json:"disk_gb,omitempty"`
}

// resize is POST /v1/sandboxes/{id}/resize, as docs/resize.md describes it: a
// running sandbox grows its disk in place and changes cpu and ram_mb live
// within its headroom; a stopped one records the size for its next start.
func (s *Server) resize(w http.ResponseWriter, r *http.Request) {
	var b resizeBody
	if !decodeStrict(w, r, &b) {
		return
	}
	switch {
	case b.CPU == nil && b.RAMMB == nil && b.DiskGB == nil:
		writeErr(w, 400, "invalid_request", "nothing to resize: send cpu, ram_mb or disk_gb", "field", "cpu")
		return
	case b.DiskGB != nil && (b.CPU != nil || b.RAMMB != nil):
		writeErr(w, 400, "invalid_request", "change disk_gb in a request of its own, without cpu and ram_mb", "field", "disk_gb")
		return
	case b.CPU != nil && (*b.CPU <= 0 || *b.CPU > 64):
		writeErr(w, 400, "invalid_request", "cpu must be > 0 and <= 64", "field", "cpu")
		return
	case b.RAMMB != nil && *b.RAMMB < 128:
		writeErr(w, 400, "invalid_request", "ram_mb must be >= 128", "field", "ram_mb")
		return
	case b.DiskGB != nil && *b.DiskGB <= 0:
		writeErr(w, 400, "invalid_request", "disk_gb must be > 0", "field", "disk_gb")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r, false)
	if sb == nil {
		return
	}
	if b.DiskGB != nil && *b.DiskGB < sb.DiskGB {
		writeErr(w, 400, "invalid_request", fmt.Sprintf("disk_gb can only grow; it is %d", sb.DiskGB), "field", "disk_gb")
		return
	}
	out := map[string]any{"requested": b, "partial": false}
	status := 200
	switch sb.State {
	case "running":
		if b.DiskGB != nil && *b.DiskGB != sb.DiskGB && s.DiskGrowUnsupported {
			writeErr(w, 409, "disk_grow_unsupported", "this sandbox's filesystem cannot grow online; stop it, then resize")
			return
		}
		maxCPU, maxRAM := max(s.LiveMaxCPU, sb.CPU), max(s.LiveMaxRAMMB, sb.RAMMB)
		cpu, ram := cmpOr(b.CPU, sb.CPU), cmpOr(b.RAMMB, sb.RAMMB)
		var reason string
		switch {
		case b.CPU == nil && b.RAMMB == nil:
		case s.LiveResizeUnsupported != "":
			reason = s.LiveResizeUnsupported
		case cpu > maxCPU:
			reason = fmt.Sprintf("cpu %s is above this boot's maximum of %s", fmtCPU(cpu), fmtCPU(maxCPU))
		case ram > maxRAM:
			reason = fmt.Sprintf("ram_mb %d is above this boot's maximum of %d", ram, maxRAM)
		}
		if reason != "" {
			writeErr(w, 409, "sandbox_not_resizable",
				fmt.Sprintf("this running sandbox cannot change cpu or ram_mb live (%s); stop it, then resize", reason),
				"live_resize", map[string]any{"supported": false, "reason": reason},
				"hint", map[string]any{"action": "stop_then_resize", "applies_at": "restart", "steps": []string{
					"POST /v1/sandboxes/" + sb.ID + "/stop", "POST /v1/sandboxes/" + sb.ID + "/resize",
				}})
			return
		}
		// Memory goes back down no lower than the boot size, and only as
		// far as the guest can free.
		if floor := max(sb.bootRAMMB, min(sb.RAMMB, s.RAMShrinkFloorMB)); ram < floor {
			ram = floor
			out["partial"] = true
		}
		sb.CPU, sb.RAMMB, sb.DiskGB = cpu, ram, cmpOr(b.DiskGB, sb.DiskGB)
		out["applies_at"] = "now"
		out["live"] = map[string]any{
			"max_cpu": maxCPU, "max_ram_mb": maxRAM,
			"guest_cpus_online": int(math.Ceil(cpu)), "guest_mem_total_mb": ram * 972 / 1000,
		}
	case "stopped", "archived", "failed":
		sb.CPU, sb.RAMMB, sb.DiskGB = cmpOr(b.CPU, sb.CPU), cmpOr(b.RAMMB, sb.RAMMB), cmpOr(b.DiskGB, sb.DiskGB)
		out["applies_at"] = "next_start"
		if s.ResizePending {
			out["applies_at"], status = "pending", 202
		}
	default:
		writeErr(w, 409, "conflict", fmt.Sprintf("sandbox is %s; resize needs it running or stopped", sb.State), "state", sb.State)
		return
	}
	sb.UpdatedAt = Time{s.now()}
	s.track(sb, sb.UpdatedAt.Time)
	out["id"], out["state"], out["cpu"], out["ram_mb"], out["disk_gb"] = sb.ID, sb.State, sb.CPU, sb.RAMMB, sb.DiskGB
	writeJSON(w, status, out)
}

func cmpOr[T any](p *T, def T) T {
	if p != nil {
		return *p
	}
	return def
}

func fmtCPU(c float64) string { return strconv.FormatFloat(c, 'g', -1, 64) }

// metrics is GET /v1/sandboxes/{id}/metrics: made-up but consistent
// figures for a running sandbox (disk use counts the files it holds).
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.running(w, r)
	if sb == nil {
		return
	}
	memLimit := int64(sb.RAMMB) << 20
	diskUsed := int64(64 << 20)
	for _, f := range s.files[sb.ID] {
		diskUsed += int64(len(f.data))
	}
	writeJSON(w, 200, map[string]any{
		"cpu_percent": 12.5, "memory_used_bytes": memLimit / 4, "memory_limit_bytes": memLimit,
		"disk_used_bytes": diskUsed, "disk_size_bytes": int64(sb.DiskGB) << 30,
		"net_rx_bytes": 1 << 20, "net_tx_bytes": 64 << 10, "pids": 3, "at": Time{s.now()},
	})
}

// usage is GET /v1/sandboxes/{id}/usage?from=&to=: the sandbox's periods
// clipped to the window, running billed as compute and stopped as storage.
func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var window [2]time.Time
	for i, name := range []string{"from", "to"} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeErr(w, 400, "invalid_request", name+" must be an RFC 3339 time, e.g. 2026-11-29T15:04:05Z", "field", name)
				return
			}
			window[i] = t
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r, true)
	if sb == nil {
		return
	}
	from, to := window[0], window[1]
	if from.IsZero() || from.Before(sb.CreatedAt.Time) {
		from = sb.CreatedAt.Time
	}
	if to.IsZero() {
		to = s.now()
	}
	if !to.After(from) {
		writeErr(w, 400, "invalid_request", "to must be after from", "field", "to")
		return
	}
	var cpuSec, ramGBSec, storageGBH float64
	periods := []map[string]any{}
	for i, p := range sb.periods {
		end := to
		if i+1 < len(sb.periods) {
			end = sb.periods[i+1].from
		}
		start, stop := maxTime(p.from, from), minTime(end, to)
		if !stop.After(start) {
			continue
		}
		secs := stop.Sub(start).Seconds()
		switch p.state {
		case "running":
			cpuSec += p.cpu * secs
			ramGBSec += float64(p.ram) / 1024 * secs
		case "stopped":
			storageGBH += float64(p.diskGB) * secs / 3600
		}
		periods = append(periods, map[string]any{
			"state": p.state, "from": Time{start}, "to": Time{stop}, "cpu": p.cpu, "ram_mb": p.ram, "disk_gb": p.diskGB,
		})
	}
	writeJSON(w, 200, map[string]any{
		"id": sb.ID, "from": Time{from}, "to": Time{to},
		"cpu_seconds": cpuSec, "ram_gb_seconds": ramGBSec, "storage_gb_hours": storageGBH, "periods": periods,
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
