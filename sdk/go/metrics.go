package platinum

import (
	"context"
	"fmt"
	"net/url"
	"time"
)

// Metrics are a running sandbox's live figures, read from its cgroups and
// disk at At. For what is billed, see Usage.
type Metrics struct {
	// CPUPercent is the share of the sandbox's vCPUs in use: 100 is all.
	CPUPercent       float64 `json:"cpu_percent"`
	MemoryUsedBytes  int64   `json:"memory_used_bytes"`
	MemoryLimitBytes int64   `json:"memory_limit_bytes"`
	DiskUsedBytes    int64   `json:"disk_used_bytes"`
	DiskSizeBytes    int64   `json:"disk_size_bytes"`
	// NetRxBytes and NetTxBytes count since the sandbox's last boot.
	NetRxBytes int64 `json:"net_rx_bytes"`
	NetTxBytes int64 `json:"net_tx_bytes"`
	// PIDs counts the processes and threads in the sandbox.
	PIDs int       `json:"pids"`
	At   time.Time `json:"at"`
}

// Metrics returns the sandbox's live CPU, memory, disk, network and
// process figures. A sandbox that is not running gives an APIError with
// code sandbox_not_ready.
func (s *SandboxesService) Metrics(ctx context.Context, id string) (*Metrics, error) {
	return fetchJSON[Metrics](ctx, s.c, "GET", sandboxPath(id)+"/metrics", nil, nil, "metrics of sandbox %s", id)
}

// Usage is what a sandbox was billed for over a window. Only running
// bills compute (CPUSeconds: vCPUs × seconds; RAMGBSeconds: GB of RAM ×
// seconds); stopped bills local storage (StorageGBHours: disk GB × hours);
// archived bills nothing.
type Usage struct {
	ID             string        `json:"id"`
	From           time.Time     `json:"from"`
	To             time.Time     `json:"to"`
	CPUSeconds     float64       `json:"cpu_seconds"`
	RAMGBSeconds   float64       `json:"ram_gb_seconds"`
	StorageGBHours float64       `json:"storage_gb_hours"`
	Periods        []UsagePeriod `json:"periods"`
}

// UsagePeriod is a stretch of one state and size within a Usage window.
// A resize or a state change starts a new one, which is how a sandbox is
// billed at its old size up to a resize and at the new size after.
type UsagePeriod struct {
	State  State     `json:"state"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	CPU    float64   `json:"cpu"`
	RAMMB  int       `json:"ram_mb"`
	DiskGB int       `json:"disk_gb"`
}

// Usage returns the sandbox's billed usage between from and to. A zero
// from means since the sandbox was created, a zero to means until now.
// A bad window gives an APIError with code invalid_request.
func (s *SandboxesService) Usage(ctx context.Context, id string, from, to time.Time) (*Usage, error) {
	q := url.Values{}
	if t := apiTime(from); t != nil {
		q.Set("from", *t)
	}
	if t := apiTime(to); t != nil {
		q.Set("to", *t)
	}
	var u Usage
	if _, err := s.c.doJSON(ctx, "GET", sandboxPath(id)+"/usage", q, nil, &u); err != nil {
		return nil, fmt.Errorf("usage of sandbox %s: %w", id, err)
	}
	if u.Periods == nil {
		u.Periods = []UsagePeriod{}
	}
	return &u, nil
}
