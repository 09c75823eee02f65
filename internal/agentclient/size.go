package agentclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// GuestSize is the size a sandbox sees from inside: the CPUs its processes
// may run on (nproc) and MemTotal of its /proc/meminfo.
type GuestSize struct {
	CPUsOnline int    `json:"cpus_online"`
	MemTotalMB uint64 `json:"mem_total_mb"`
}

// Size reads the guest's own view of its size (GET /size). An agent older
// than the endpoint answers sandbox.ErrNotFound.
func (c *Client) Size(ctx context.Context) (GuestSize, error) {
	resp, err := c.do(ctx, http.MethodGet, "/size", nil, "", nil)
	if err != nil {
		return GuestSize{}, fmt.Errorf("agent size: %w", err)
	}
	defer drain(resp.Body)
	var g GuestSize
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&g); err != nil {
		return GuestSize{}, fmt.Errorf("agent size: %w", err)
	}
	return g, nil
}
