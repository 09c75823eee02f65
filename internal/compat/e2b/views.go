package e2b

import (
	"math"
	"time"

	"github.com/platinum-dev/platinum/internal/compat/compatkit"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// E2B's two visible states.
const (
	stateRunning = "running"
	statePaused  = "paused"
)

// e2bState maps a Platinum state onto E2B's: running is running; every
// state on the way to or from stopped is paused (connect resumes it).
// Sandboxes still being created, failed or being deleted do not exist for
// E2B callers (E2B shows a sandbox only once create has answered), so ok
// is false for them.
func e2bState(s sandbox.State) (state string, ok bool) {
	switch s {
	case sandbox.StateRunning:
		return stateRunning, true
	case sandbox.StateStarting, sandbox.StateStopping, sandbox.StateStopped,
		sandbox.StateArchiving, sandbox.StateArchived, sandbox.StateRestoring:
		return statePaused, true
	}
	return "", false
}

// Template IDs E2B code uses that name a Platinum template by another
// name. Our own slugs are accepted as they are.
// code-interpreter-v1 is @e2b/code-interpreter's default template.
var templateAliases = map[string]string{"base": "pt-base", "code-interpreter-v1": "code-interpreter"}

func templateSlug(id string) string {
	if slug, ok := templateAliases[id]; ok {
		return slug
	}
	return id
}

// sandboxView is E2B's Sandbox (create, connect and resume answers), plus
// what the start restored (docs/stop-start.md: E2B connect/resume answers
// carry the same information as restore and ramRestored).
type sandboxView struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	ClientID           string  `json:"clientID"`
	Alias              string  `json:"alias,omitempty"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
	Restore            string  `json:"restore,omitempty"`
	RAMRestored        *bool   `json:"ramRestored,omitempty"`
}

func (h *Handler) sandboxView(sb sandbox.Sandbox, withRestore bool) sandboxView {
	v := sandboxView{
		TemplateID: sb.Template, SandboxID: sb.ID, ClientID: sb.HostID, Alias: sb.Template,
		EnvdVersion: h.cfg.EnvdVersion, EnvdAccessToken: sb.AgentToken,
	}
	// Platinum checks traffic to every sandbox port against the sandbox's
	// token (ports are not public by default), so the answer names it as
	// the traffic token too: that is how E2B's SDKs learn to send it on
	// port calls (code-interpreter's /contexts calls carry only that header).
	tok := sb.AgentToken
	v.TrafficAccessToken = &tok
	if withRestore {
		v.Restore, v.RAMRestored = compatkit.Restored(sb)
	}
	return v
}

// lifecycleView is E2B's SandboxLifecycle.
type lifecycleView struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// detailView is E2B's SandboxDetail (GET /sandboxes/:id) and, without the
// access token, ListedSandbox (list items).
type detailView struct {
	TemplateID          string            `json:"templateID"`
	Alias               string            `json:"alias,omitempty"`
	SandboxID           string            `json:"sandboxID"`
	ClientID            string            `json:"clientID"`
	StartedAt           string            `json:"startedAt"`
	EndAt               string            `json:"endAt"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int               `json:"memoryMB"`
	DiskSizeMB          int               `json:"diskSizeMB"`
	Metadata            map[string]string `json:"metadata"`
	State               string            `json:"state"`
	EnvdVersion         string            `json:"envdVersion"`
	EnvdAccessToken     string            `json:"envdAccessToken,omitempty"`
	AllowInternetAccess bool              `json:"allowInternetAccess"`
	Domain              *string           `json:"domain"`
	Lifecycle           lifecycleView     `json:"lifecycle"`
	VolumeMounts        []struct{}        `json:"volumeMounts"`
	Restore             string            `json:"restore,omitempty"`
	RAMRestored         *bool             `json:"ramRestored,omitempty"`
}

// noExpiry is endAt for a sandbox without a TTL (made through /v1): E2B
// requires a date, and "never" is the truth.
var noExpiry = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

func (h *Handler) detailView(sb sandbox.Sandbox, state string, withToken bool) detailView {
	started := sb.CreatedAt
	if sb.LastStart != nil && !sb.LastStart.At.IsZero() {
		started = sb.LastStart.At
	}
	end := noExpiry
	if sb.ExpiresAt != nil {
		end = *sb.ExpiresAt
	}
	onTimeout := "kill"
	if action(sb) == sandbox.ExpireStop {
		onTimeout = "pause"
	}
	v := detailView{
		TemplateID: sb.Template, Alias: sb.Template, SandboxID: sb.ID, ClientID: sb.HostID,
		StartedAt: started.UTC().Format(time.RFC3339Nano), EndAt: end.UTC().Format(time.RFC3339Nano),
		CPUCount: cpuCount(sb), MemoryMB: sb.RAMMB, DiskSizeMB: sb.DiskGB * 1024,
		Metadata: sb.Metadata, State: state, EnvdVersion: h.cfg.EnvdVersion,
		AllowInternetAccess: true,
		Lifecycle:           lifecycleView{OnTimeout: onTimeout, AutoResume: !sb.NoAutoResume},
		VolumeMounts:        []struct{}{},
	}
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	if withToken {
		v.EnvdAccessToken = sb.AgentToken
	}
	v.Restore, v.RAMRestored = compatkit.Restored(sb)
	return v
}

// metricView is E2B's SandboxMetric.
type metricView struct {
	Timestamp     string  `json:"timestamp"`
	TimestampUnix int64   `json:"timestampUnix"`
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemUsed       uint64  `json:"memUsed"`
	MemTotal      uint64  `json:"memTotal"`
	MemCache      uint64  `json:"memCache"`
	DiskUsed      uint64  `json:"diskUsed"`
	DiskTotal     uint64  `json:"diskTotal"`
}

func cpuCount(sb sandbox.Sandbox) int { return max(1, int(math.Ceil(sb.CPU))) }
