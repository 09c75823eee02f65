package ptdtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Warm builds each template by WarmTemplate, allowing each 40 minutes (a
// cold build of code-interpreter under load takes tens of minutes).
func (d *Daemon) Warm(slugs ...string) error {
	for _, slug := range slugs {
		if err := WarmTemplate(d.URL, d.Token, slug, 40*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// WarmTemplate creates one sandbox of slug on the ptd at url (building the
// template first when it has no ready version: minutes for the large
// derived ones on a cold cache) and deletes it once it runs, so the
// tests after it extract the template from the cache. The create's own
// wait is capped by the server (10 min) and may answer 202 with
// wait_timed_out under load; the sandbox is then polled until it runs or
// fails, for up to bound in all.
func WarmTemplate(url, token, slug string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	hc := &http.Client{Timeout: bound + time.Minute}
	call := func(method, path string, body []byte) (int, []byte, error) {
		req, err := http.NewRequest(method, url+path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	body, _ := json.Marshal(map[string]string{"template": slug})
	st, b, err := call("POST", fmt.Sprintf("/v1/sandboxes?wait_for_state=running&wait_timeout_ms=%d", bound.Milliseconds()), body)
	if err != nil {
		return fmt.Errorf("warm %s: %w", slug, err)
	}
	if st != http.StatusCreated && st != http.StatusAccepted {
		return fmt.Errorf("warm %s: %d %s", slug, st, b)
	}
	var sb struct{ ID, State, Reason string }
	if err := json.Unmarshal(b, &sb); err != nil || sb.ID == "" {
		return fmt.Errorf("warm %s: %d %s", slug, st, b)
	}
	defer call("DELETE", "/v1/sandboxes/"+sb.ID, nil)
	for sb.State != "running" {
		switch sb.State {
		case "failed", "stopping", "stopped", "deleting", "deleted":
			return fmt.Errorf("warm %s: sandbox %s is %s: %s", slug, sb.ID, sb.State, sb.Reason)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warm %s: sandbox %s still %s after %s", slug, sb.ID, sb.State, bound)
		}
		time.Sleep(2 * time.Second)
		st, b, err := call("GET", "/v1/sandboxes/"+sb.ID, nil)
		if err != nil || st != http.StatusOK {
			return fmt.Errorf("warm %s: get %s: %d %s %v", slug, sb.ID, st, b, err)
		}
		if err := json.Unmarshal(b, &sb); err != nil {
			return fmt.Errorf("warm %s: %w: %s", slug, err, b)
		}
	}
	return nil
}
