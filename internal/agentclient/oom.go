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

// OOMKill is one OOM kill in a gVisor sandbox (pt-agent's GET /oom): by
// its memory guard, or by gVisor's own kernel at the sandbox's memory
// limit (Source "kernel"; it names no process).
type OOMKill struct {
	Seq      uint64    `json:"seq"`
	Source   string    `json:"source"` // "guard" or "kernel"; empty from an older pt-agent: "guard"
	PID      int       `json:"pid"`
	Command  string    `json:"command"`
	RSSBytes uint64    `json:"rss_bytes"`
	UsedMB   uint64    `json:"used_mb"`
	LimitMB  uint64    `json:"limit_mb"`
	At       time.Time `json:"at"`
}

// OOMKills returns the kills after seq (which acknowledges those up to
// it), or with after nil those after the last acknowledged, waiting up to
// wait for one (a long poll: wait more than the client's own timeout only
// on a client without one).
func (c *Client) OOMKills(ctx context.Context, after *uint64, wait time.Duration) ([]OOMKill, error) {
	q := url.Values{"wait_ms": {strconv.FormatInt(wait.Milliseconds(), 10)}}
	if after != nil {
		q.Set("after", strconv.FormatUint(*after, 10))
	}
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
