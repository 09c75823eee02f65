package daytona

import (
	"cmp"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/compat/compatkit"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Labels with these prefixes are Platinum's own settings kept in the
// sandbox's metadata (public previews); they are never shown as labels.
const (
	hiddenLabelPrefix = "daytona."
	labelPublic       = hiddenLabelPrefix + "public"
	// labelSnapshot is the Daytona snapshot name a clone was made from.
	labelSnapshot = hiddenLabelPrefix + "snapshot"
	// labelSigningGen is the generation of the sandbox's file URL
	// signing key (rotate moves it on).
	labelSigningGen = hiddenLabelPrefix + "signing-gen"
	// LabelRuntime picks the runtime class at create (runc or gvisor);
	// it stays visible.
	LabelRuntime = "platinum.runtime"
)

// daytonaState maps a Platinum state onto Daytona's SandboxState enum so
// the SDK's waits end where they should (started, stopped, destroyed;
// error fails waitUntilStarted).
func daytonaState(s sandbox.State) string {
	switch s {
	case sandbox.StateCreating:
		return "creating"
	case sandbox.StateStarting:
		return "starting"
	case sandbox.StateRunning:
		return "started"
	case sandbox.StateStopping:
		return "stopping"
	case sandbox.StateStopped:
		return "stopped"
	case sandbox.StateArchiving:
		return "archiving"
	case sandbox.StateArchived:
		return "archived"
	case sandbox.StateRestoring:
		return "restoring"
	case sandbox.StateDeleting:
		return "destroying"
	case sandbox.StateDeleted:
		return "destroyed"
	case sandbox.StateFailed:
		return "error"
	}
	return "unknown"
}

// desiredState is where the sandbox is headed, in Daytona's terms.
func desiredState(s sandbox.State) string {
	switch s {
	case sandbox.StateStopping, sandbox.StateStopped:
		return "stopped"
	case sandbox.StateArchiving, sandbox.StateArchived:
		return "archived"
	case sandbox.StateDeleting, sandbox.StateDeleted:
		return "destroyed"
	}
	return "started"
}

// minutesPerDay converts Platinum's day timers to Daytona's minutes.
const minutesPerDay = 24 * 60

// sandboxDTO is Daytona's Sandbox plus what the last start restored
// (restore, ram_restored) and the runtime class.
type sandboxDTO struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId"`
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    *string           `json:"networkAllowList,omitempty"`
	DomainAllowList     *string           `json:"domainAllowList,omitempty"`
	Target              string            `json:"target"`
	CPU                 int               `json:"cpu"`
	GPU                 int               `json:"gpu"`
	GPUType             string            `json:"gpuType,omitempty"`
	Memory              int               `json:"memory"`
	Disk                int               `json:"disk"`
	State               string            `json:"state"`
	DesiredState        string            `json:"desiredState"`
	ErrorReason         string            `json:"errorReason,omitempty"`
	Recoverable         bool              `json:"recoverable"`
	BackupState         string            `json:"backupState"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	AutoDestroyAt       *string           `json:"autoDestroyAt,omitempty"`
	Volumes             []any             `json:"volumes"`
	CreatedAt           string            `json:"createdAt"`
	UpdatedAt           string            `json:"updatedAt"`
	LastActivityAt      string            `json:"lastActivityAt,omitempty"`
	SandboxClass        string            `json:"sandboxClass"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
	Runtime             string            `json:"runtime,omitempty"`
	Restore             string            `json:"restore,omitempty"`
	RAMRestored         *bool             `json:"ram_restored,omitempty"`
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// view renders sb for r (whose host names the toolbox URL).
func (h *Handler) view(r *http.Request, sb sandbox.Sandbox) sandboxDTO {
	labels := map[string]string{}
	for k, v := range sb.Metadata {
		if !strings.HasPrefix(k, hiddenLabelPrefix) {
			labels[k] = v
		}
	}
	env := sb.Env
	if env == nil {
		env = map[string]string{}
	}
	name := sb.Name
	if name == "" {
		name = sb.ID
	}
	snapshot := sb.Template
	if v := sb.Metadata[labelSnapshot]; v != "" {
		snapshot = v
	}
	d := sandboxDTO{
		ID: sb.ID, OrganizationID: sb.OrgID, Name: name, Snapshot: snapshot, User: "root",
		Env: env, Labels: labels, Public: sb.Metadata[labelPublic] == "true", Target: cmp.Or(h.cfg.Region, "local"),
		// Daytona's sizes are whole vCPUs and GiB (its clients parse
		// integers): fractions (a /v1 sandbox of 512 MB) round up.
		CPU: int(math.Ceil(sb.CPU)), Memory: int(math.Ceil(float64(sb.RAMMB) / 1024)), Disk: sb.DiskGB,
		State: daytonaState(sb.State), DesiredState: desiredState(sb.State), BackupState: "None",
		AutoStopInterval: sb.Retention.AutoStopMinutes, AutoArchiveInterval: sb.Retention.AutoArchiveDays * minutesPerDay,
		AutoDeleteInterval: -1, Volumes: []any{}, CreatedAt: isoTime(sb.CreatedAt), UpdatedAt: isoTime(sb.UpdatedAt),
		SandboxClass: "container", ToolboxProxyURL: toolboxURL(r), Runtime: sb.Runtime,
		GPU: sb.GPUs, GPUType: gpuType(sb.GPUModel),
	}
	switch {
	case sb.Retention.Type == sandbox.TypeEphemeral:
		d.AutoDeleteInterval = 0
	case sb.Retention.AutoDeleteDays > 0:
		d.AutoDeleteInterval = sb.Retention.AutoDeleteDays * minutesPerDay
	}
	if sb.State == sandbox.StateFailed {
		d.ErrorReason, d.Recoverable = sb.Reason, true // a start boots it again
	}
	if sb.LastActivityAt != nil {
		d.LastActivityAt = isoTime(*sb.LastActivityAt)
	}
	if sb.ExpiresAt != nil && sb.ExpiryAction == sandbox.ExpireDelete {
		at := isoTime(*sb.ExpiresAt)
		d.AutoDestroyAt = &at
	}
	if n := sb.Network; n != nil && n.Egress == "deny" {
		if len(n.AllowOut) == 0 {
			d.NetworkBlockAll = true
		} else {
			var cidrs, domains []string
			for _, a := range n.AllowOut {
				if isCIDR(a) {
					cidrs = append(cidrs, a)
				} else {
					domains = append(domains, a)
				}
			}
			if len(cidrs) > 0 {
				list := strings.Join(cidrs, ",")
				d.NetworkAllowList = &list
			}
			if len(domains) > 0 {
				list := strings.Join(domains, ",")
				d.DomainAllowList = &list
			}
		}
	}
	return d
}

// isCIDR reports whether an allow_out entry is an address or prefix (not
// a domain).
func isCIDR(s string) bool {
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

// withRestore adds what the last start brought back (start answers).
func withRestore(d sandboxDTO, sb sandbox.Sandbox) sandboxDTO {
	d.Restore, d.RAMRestored = compatkit.Restored(sb)
	return d
}
