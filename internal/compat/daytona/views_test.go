package daytona

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestDaytonaState: every Platinum state maps onto Daytona's enum where
// the SDK's waits end right (started ends waitUntilStarted, stopped and
// destroyed end waitUntilStopped, error fails it), with the desired state
// the transition heads to.
func TestDaytonaState(t *testing.T) {
	for _, c := range []struct {
		in            sandbox.State
		state, wanted string
	}{
		{sandbox.StateCreating, "creating", "started"},
		{sandbox.StateStarting, "starting", "started"},
		{sandbox.StateRunning, "started", "started"},
		{sandbox.StateStopping, "stopping", "stopped"},
		{sandbox.StateStopped, "stopped", "stopped"},
		{sandbox.StateArchiving, "archiving", "archived"},
		{sandbox.StateArchived, "archived", "archived"},
		{sandbox.StateRestoring, "restoring", "started"},
		{sandbox.StateDeleting, "destroying", "destroyed"},
		{sandbox.StateDeleted, "destroyed", "destroyed"},
		{sandbox.StateFailed, "error", "started"},
		{sandbox.State("martian"), "unknown", "started"},
	} {
		if got := daytonaState(c.in); got != c.state {
			t.Errorf("daytonaState(%s) = %s, want %s", c.in, got, c.state)
		}
		if got := desiredState(c.in); got != c.wanted {
			t.Errorf("desiredState(%s) = %s, want %s", c.in, got, c.wanted)
		}
	}
	// Every state Platinum has is mapped (a new one must be mapped too).
	for _, s := range sandbox.AllStates {
		if daytonaState(s) == "unknown" {
			t.Errorf("state %s is not mapped", s)
		}
	}
}

// TestView: what the DTO says about a sandbox, field by field where the
// mapping is not a copy.
func TestView(t *testing.T) {
	r := httptest.NewRequest("GET", "http://ptd.example:7070/daytona/api/sandbox/x", nil)
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	sb := sandbox.Sandbox{ID: "sbx_1", OrgID: "org_1", State: sandbox.StateFailed, Reason: "boot failed", Template: "python-node",
		CPU: 0.5, RAMMB: 1536, DiskGB: 3, ExpiresAt: &exp, ExpiryAction: sandbox.ExpireDelete, GPUs: 2, GPUModel: "RTX 4090",
		Metadata:  map[string]string{"team": "x", labelPublic: "true", labelSnapshot: "my-snap", labelSigningGen: "2"},
		Network:   &sandbox.NetworkPolicy{Egress: "deny", AllowOut: []string{"10.0.0.0/8", "example.com", "192.0.2.1"}},
		Retention: sandbox.Retention{Type: sandbox.TypeEphemeral, AutoStopMinutes: 15, AutoArchiveDays: 7}}
	d := (&Handler{}).view(r, sb)
	if d.State != "error" || !d.Recoverable || d.ErrorReason != "boot failed" {
		t.Errorf("error state: %+v", d)
	}
	if d.Name != "sbx_1" || d.Snapshot != "my-snap" || !d.Public || len(d.Labels) != 1 || d.Labels["team"] != "x" {
		t.Errorf("name, snapshot, public, labels (hidden ones left out): %+v", d)
	}
	if d.CPU != 1 || d.Memory != 2 || d.Disk != 3 {
		t.Errorf("sizes round up to whole vCPUs and GiB: cpu %d memory %d disk %d", d.CPU, d.Memory, d.Disk)
	}
	if d.GPU != 2 || d.GPUType != "RTX-4090" {
		t.Errorf("gpu %d gpuType %q", d.GPU, d.GPUType)
	}
	if d.AutoDestroyAt == nil || *d.AutoDestroyAt != "2030-01-02T03:04:05.000Z" {
		t.Errorf("autoDestroyAt: %v", d.AutoDestroyAt)
	}
	if d.AutoDeleteInterval != 0 || d.AutoStopInterval != 15 || d.AutoArchiveInterval != 7*24*60 {
		t.Errorf("timers: %+v", d)
	}
	if d.NetworkBlockAll || d.NetworkAllowList == nil || *d.NetworkAllowList != "10.0.0.0/8,192.0.2.1" ||
		d.DomainAllowList == nil || *d.DomainAllowList != "example.com" {
		t.Errorf("network: block %v allow %v domains %v", d.NetworkBlockAll, d.NetworkAllowList, d.DomainAllowList)
	}
	if d.ToolboxProxyURL != "http://ptd.example:7070/daytona/toolbox" {
		t.Errorf("toolboxProxyUrl: %s", d.ToolboxProxyURL)
	}
	if d.Target != "local" {
		t.Errorf("target of a ptd without a region: %q, want local", d.Target)
	}
	if d := (&Handler{cfg: Config{Region: "rb"}}).view(r, sb); d.Target != "rb" {
		t.Errorf("target of a ptd of region rb: %q", d.Target)
	}
	sb.Network, sb.Metadata, sb.ExpiryAction = &sandbox.NetworkPolicy{Egress: "deny"}, nil, sandbox.ExpireStop
	d = (&Handler{}).view(r, sb)
	if !d.NetworkBlockAll || d.NetworkAllowList != nil || d.Snapshot != "python-node" || d.AutoDestroyAt != nil {
		t.Errorf("block all, the template as snapshot, a stop expiry is no autoDestroyAt: %+v", d)
	}
}
