package platinum

import (
	"context"
	"net/url"
)

// Host is one sandbox host as GET /v1/hosts shows it: its runtime classes
// (the host the answering ptd runs) and its registration in the store.
type Host struct {
	ID             string             `json:"id"`
	State          string             `json:"state,omitempty"`
	StateReason    string             `json:"state_reason,omitempty"`
	Generation     int64              `json:"generation,omitempty"`
	Region         string             `json:"region,omitempty"`
	RegisteredAt   string             `json:"registered_at,omitempty"`
	HeartbeatAt    string             `json:"heartbeat_at,omitempty"`
	Capacity       *HostCapacity      `json:"capacity,omitempty"`
	Load           *HostLoad          `json:"load,omitempty"`
	RuntimeClasses []HostRuntimeClass `json:"runtime_classes,omitempty"`
}

// HostRuntimeClass is one runtime class of a host.
type HostRuntimeClass struct {
	Name            string `json:"name"`
	StopKeepsMemory string `json:"stop_keeps_memory,omitempty"`
	Checkpoint      bool   `json:"checkpoint"`
}

// HostCapacity is what a host's machine offers.
type HostCapacity struct {
	CPU    int `json:"cpu"`
	RAMMB  int `json:"ram_mb"`
	DiskGB int `json:"disk_gb"`
}

// HostLoad is a host's sandboxes as of its last heartbeat.
type HostLoad struct {
	Sandboxes map[string]int `json:"sandboxes"`
	CPU       float64        `json:"cpu"`
	RAMMB     int            `json:"ram_mb"`
	DiskGB    int            `json:"disk_gb"`
}

// HostsService groups the host calls. Get it from Client.Hosts.
type HostsService struct {
	c *Client
}

// List returns every host.
func (s *HostsService) List(ctx context.Context) ([]Host, error) {
	return fetchRows[Host](ctx, s.c, "GET", "/v1/hosts", nil, nil, "list hosts")
}

// Drain stops new sandboxes going to a host (platform admin token only);
// its sandboxes keep running.
func (s *HostsService) Drain(ctx context.Context, id string) (*Host, error) {
	return s.set(ctx, id, "drain")
}

// Undrain lets a drained host take new sandboxes again.
func (s *HostsService) Undrain(ctx context.Context, id string) (*Host, error) {
	return s.set(ctx, id, "undrain")
}

func (s *HostsService) set(ctx context.Context, id, verb string) (*Host, error) {
	return fetchJSON[Host](ctx, s.c, "POST", "/v1/hosts/"+url.PathEscape(id)+"/"+verb, nil, nil, "%s host %s", verb, id)
}
