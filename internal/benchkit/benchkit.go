// Package benchkit is what the benchmark programs under bench/ share: a
// minimal REST client for a ptd they started, and percentile reporting.
// Benchmarks print numbers; they never assert on them.
package benchkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"time"
)

// Percentiles returns p50, p95 and p99 (nearest rank).
func Percentiles(ds []time.Duration) [3]time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return [3]time.Duration{at(.50), at(.95), at(.99)}
}

// Ratio is a's p50 over b's.
func Ratio(a, b []time.Duration) float64 {
	return float64(Percentiles(a)[0]) / float64(Percentiles(b)[0])
}

// MS renders a duration in milliseconds with two decimals.
func MS(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

// Report prints one line of percentiles and, with a baseline measured in
// the same run, the p50 ratio against it. A benchmark that took no
// samples (asked for none: -n 0 with only a burst) prints nothing.
func Report(name string, ds, baseline []time.Duration) {
	if len(ds) == 0 {
		return
	}
	p := Percentiles(ds)
	line := fmt.Sprintf("%-42s n=%-4d p50 %9s  p95 %9s  p99 %9s", name, len(ds), MS(p[0]), MS(p[1]), MS(p[2]))
	if len(baseline) > 0 {
		line += fmt.Sprintf("   p50 ratio vs baseline %.2fx", Ratio(ds, baseline))
	}
	fmt.Println(line)
}

// Client is a minimal REST client (the SDK is measured by its own tests).
type Client struct{ URL, Token string }

// Do sends one request with a JSON body (none when body is nil) and
// returns the status and body.
func (c *Client) Do(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := c.NewRequest(context.Background(), method, path, rd)
	if err != nil {
		return 0, nil, err
	}
	return Send(req)
}

// NewRequest is a request to path on the ptd, with the client's token:
// for the calls Do does not fit (a streamed body or answer, more
// headers).
func (c *Client) NewRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	return req, nil
}

// Send sends req and returns the status and the whole body.
func Send(req *http.Request) (int, []byte, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Create makes a running sandbox of tpl and returns its ID.
func (c *Client) Create(tpl string) (string, error) {
	return c.CreateRunning(tpl, map[string]any{"template": tpl, "cpu": 1, "ram_mb": 512, "disk_gb": 1})
}

// CreateRunning makes a sandbox from the create body, waiting for it to
// run, and returns its ID; label names it in errors.
func (c *Client) CreateRunning(label string, body map[string]any) (string, error) {
	st, b, err := c.Do("POST", "/v1/sandboxes?wait_for_state=running", body)
	if err != nil || st != 201 {
		return "", fmt.Errorf("create %s: %d %s %v", label, st, b, err)
	}
	var m struct{ ID, State string }
	json.Unmarshal(b, &m)
	if m.State != "running" {
		return "", fmt.Errorf("create %s: %s", label, b)
	}
	return m.ID, nil
}

// EnsureCreate is EnsureTemplate then Create: the one sandbox a bench
// measures against, on a ptd that may not have built tpl yet.
func (c *Client) EnsureCreate(tpl string) (string, error) {
	if err := c.EnsureTemplate(tpl); err != nil {
		return "", err
	}
	return c.Create(tpl)
}

// Exec runs argv in the sandbox and returns the raw answer.
func (c *Client) Exec(id string, argv []string) (string, error) {
	st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": argv})
	if err != nil || st != 200 {
		return "", fmt.Errorf("exec: %d %s %v", st, b, err)
	}
	return string(b), nil
}

// Delete asks for the sandbox's deletion (teardown is asynchronous).
func (c *Client) Delete(id string) error {
	st, b, err := c.Do("DELETE", "/v1/sandboxes/"+id, nil)
	if err != nil || st != 202 {
		return fmt.Errorf("delete: %d %s %v", st, b, err)
	}
	return nil
}

// WaitGone waits until teardown finished, so runs do not overlap.
func (c *Client) WaitGone(id string) error {
	for i := 0; i < 2000; i++ {
		_, b, _ := c.Do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil)
		if bytes.Contains(b, []byte(`"state":"deleted"`)) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("sandbox %s was not torn down", id)
}

// EnsureTemplate builds slug if it has no ready version and waits.
func (c *Client) EnsureTemplate(slug string) error {
	for i := 0; i < 1800; i++ {
		_, b, err := c.Do("GET", "/v1/templates/"+slug, nil)
		if err != nil {
			return err
		}
		switch {
		case bytes.Contains(b, []byte(`"status":"ready"`)):
			return nil
		case bytes.Contains(b, []byte(`"status":"not_built"`)), bytes.Contains(b, []byte(`"status":"failed"`)):
			c.Do("POST", "/v1/templates/"+slug+"/build", nil)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("template %s never became ready", slug)
}

// SetPool sets the warm pool of tpl on runtime class rt ("" the server's
// default) to minReady..max (docs/sessions.md, "Warm pools") and waits
// until it holds minReady ready sandboxes, or nothing at all for 0.
func (c *Client) SetPool(tpl, rt string, minReady, max int) error {
	st, b, err := c.Do("PUT", "/v1/pools/"+tpl, map[string]any{"runtime": rt, "min_ready": minReady, "max": max})
	if err != nil || st != 200 {
		return fmt.Errorf("set pool %s@%s: %d %s %v", tpl, rt, st, b, err)
	}
	return c.WaitPool(tpl, rt, minReady)
}

// WaitPool waits until the pool of tpl on runtime class rt ("" any) has n
// ready sandboxes, or for n 0 holds none, ready or booting.
func (c *Client) WaitPool(tpl, rt string, n int) error {
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, b, err := c.Do("GET", "/v1/pools", nil)
		if err != nil {
			return err
		}
		var out struct {
			Pools []struct {
				Template, Runtime   string
				Ready, Provisioning int
			}
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return fmt.Errorf("GET /v1/pools: %w: %s", err, b)
		}
		for _, p := range out.Pools {
			if p.Template == tpl && (rt == "" || p.Runtime == rt) &&
				((n > 0 && p.Ready >= n) || (n == 0 && p.Ready+p.Provisioning == 0)) {
				return nil
			}
		}
	}
	return fmt.Errorf("pool %s@%s never reached %d ready", tpl, rt, n)
}
