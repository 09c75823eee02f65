package agentclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// OOMKill is one process the sandbox's memory guard killed (pt-agent's
// GET /oom; gVisor sandboxes, whose kernel has no OOM killer).
type OOMKill struct {
	Seq      uint64    `json:"seq"`
	PID      int       `json:"pid"`
	Command  string    `json:"command"`
	RSSBytes uint64    `json:"rss_bytes"`
	UsedMB   uint64    `json:"used_mb"`
	LimitMB  uint64    `json:"limit_mb"`
	At       time.Time `json:"at"`
}

// OOMKills returns the guard's kills after seq, waiting up to wait for one
// (a long poll: wait more than the client's own timeout only on a client
// without one).
func (c *Client) OOMKills(ctx context.Context, after uint64, wait time.Duration) ([]OOMKill, error) {
	q := url.Values{"after": {strconv.FormatUint(after, 10)}, "wait_ms": {strconv.FormatInt(wait.Milliseconds(), 10)}}
	resp, err := c.do(ctx, http.MethodGet, "/oom", q, "", nil)
	if err != nil {
		return nil, fmt.Errorf("agent oom: %w", err)
	}
	defer drain(resp.Body)
	var out struct {
		Kills []OOMKill `json:"kills"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("agent oom: %w", err)
	}
	return out.Kills, nil
}
