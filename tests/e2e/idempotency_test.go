package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// doKey is client.do with an Idempotency-Key header (none when key is "").
func (c *client) doKey(method, path, key string, body any) response {
	c.t.Helper()
	js, _ := json.Marshal(body)
	req, err := http.NewRequest(method, env.url+path, bytes.NewReader(js))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	r, err := ptdtest.Send(nil, req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// withMetadata counts the caller's sandboxes whose metadata has run=tag,
// and deletes them when the test ends.
func countTagged(t *testing.T, c *client, tag string) int {
	t.Helper()
	r := c.do("GET", "/v1/sandboxes?paginated=true&metadata[run]="+tag, nil)
	if r.Status != 200 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	var l struct {
		Rows []struct {
			ID string `json:"id"`
		} `json:"rows"`
		Total int `json:"total"`
	}
	json.Unmarshal(r.Body, &l)
	return l.Total
}

func cleanupTagged(t *testing.T, c *client, tag string) {
	t.Cleanup(func() {
		r := c.do("GET", "/v1/sandboxes?limit=200&metadata[run]="+tag, nil)
		var l struct {
			Rows []struct {
				ID string `json:"id"`
			} `json:"rows"`
		}
		json.Unmarshal(r.Body, &l)
		for _, sb := range l.Rows {
			c.do("DELETE", "/v1/sandboxes/"+sb.ID, nil)
		}
	})
}

// TestIdempotencyE2E: docs/api.md's idempotency on a real ptd: a retried
// create with the same key and body returns the first sandbox (one
// sandbox, same body, Idempotent-Replayed); another body is 409
// idempotency_key_reused; the idempotency_key body field works as the
// header; ten concurrent retries make one sandbox.
func TestIdempotencyE2E(t *testing.T) {
	c := newClient(t)
	tag := "idem-" + randHex(6)
	cleanupTagged(t, c, tag)
	body := map[string]any{"template": "busybox", "metadata": map[string]string{"run": tag}}
	key := "key-" + randHex(8)

	first := c.doKey("POST", "/v1/sandboxes", key, body)
	if first.Status != 201 || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first create: %d %v %s", first.Status, first.Header, first.Body)
	}
	retry := c.doKey("POST", "/v1/sandboxes", key, body)
	if retry.Status != 201 || !bytes.Equal(retry.Body, first.Body) || retry.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %v %s, want the first answer %s", retry.Status, retry.Header, retry.Body, first.Body)
	}
	if n := countTagged(t, c, tag); n != 1 {
		t.Fatalf("%d sandboxes after a retried create, want 1", n)
	}

	other := c.doKey("POST", "/v1/sandboxes", key, map[string]any{"template": "busybox", "cpu": 2, "metadata": map[string]string{"run": tag}})
	if other.Status != 409 || other.JSON()["code"] != "idempotency_key_reused" {
		t.Fatalf("same key, other body: %d %s", other.Status, other.Body)
	}

	// The body field, as camelCase idempotencyKey: stripped before the
	// strict decoder, then the same as the header.
	bkey := "body-" + randHex(8)
	withField := map[string]any{"template": "busybox", "metadata": map[string]string{"run": tag}, "idempotency_key": bkey}
	b1 := c.doKey("POST", "/v1/sandboxes", "", withField)
	b2 := c.doKey("POST", "/v1/sandboxes", bkey, body)
	if b1.Status != 201 || b2.Status != 201 || !bytes.Equal(b1.Body, b2.Body) || b2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("body-field key: %d %s then %d %s", b1.Status, b1.Body, b2.Status, b2.Body)
	}
	if n := countTagged(t, c, tag); n != 2 {
		t.Fatalf("%d sandboxes, want 2", n)
	}

	// Ten goroutines, one key, at once.
	ckey := "burst-" + randHex(8)
	var wg sync.WaitGroup
	answers := make([]response, 10)
	for i := range answers {
		wg.Go(func() {
			answers[i] = c.doKey("POST", "/v1/sandboxes", ckey, body)
		})
	}
	wg.Wait()
	fresh := 0
	for i, a := range answers {
		if a.Status != 201 || !bytes.Equal(a.Body, answers[0].Body) {
			t.Errorf("answer %d: %d %s, want 201 %s", i, a.Status, a.Body, answers[0].Body)
		}
		if a.Header.Get("Idempotent-Replayed") == "" {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d of 10 concurrent answers ran the create, want 1", fresh)
	}
	if n := countTagged(t, c, tag); n != 3 {
		t.Errorf("%d sandboxes after 10 concurrent retries, want 3 (one more)", n)
	}
}

// TestIdempotencyEnvPatchE2E: a key works on a mutating call other than
// create: a retried env patch answers the first result and does not run
// again over a later change.
func TestIdempotencyEnvPatchE2E(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	id := c.create(map[string]any{"template": "busybox"})
	path := "/v1/sandboxes/" + id + "/env"
	key := "env-" + randHex(8)
	first := c.doKey("PATCH", path, key, map[string]any{"env": map[string]any{"A": "1"}})
	if first.Status != 200 {
		t.Fatalf("patch: %d %s", first.Status, first.Body)
	}
	if r := c.doKey("PATCH", path, "", map[string]any{"env": map[string]any{"A": nil, "B": "2"}}); r.Status != 200 {
		t.Fatalf("second patch: %d %s", r.Status, r.Body)
	}
	retry := c.doKey("PATCH", path, key, map[string]any{"env": map[string]any{"A": "1"}})
	if retry.Status != 200 || !bytes.Equal(retry.Body, first.Body) || retry.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retried patch: %d %s, want the first answer %s", retry.Status, retry.Body, first.Body)
	}
	if out := c.mustSh(id, `echo "A=${A:-unset} B=$B"`); out != "A=unset B=2\n" {
		t.Errorf("the retried patch ran again: %q", out)
	}
}

// loseFirstResponse is a RoundTripper that delivers the first mutating
// request to the server but reports a network error to the client, as a
// dropped connection would: the SDK must retry with the same key.
type loseFirstResponse struct {
	lost atomic.Bool
	keys sync.Map // key -> count of requests
}

func (l *loseFirstResponse) RoundTrip(req *http.Request) (*http.Response, error) {
	if k := req.Header.Get("Idempotency-Key"); k != "" {
		n, _ := l.keys.LoadOrStore(k, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && req.Method == "POST" && l.lost.CompareAndSwap(false, true) {
		resp.Body.Close()
		return nil, errors.New("connection reset (simulated)")
	}
	return resp, err
}

// TestSDKIdempotencyE2E: the Go SDK sends a key per mutating call by
// default and reuses it on its own retry, so a create whose answer was
// lost makes exactly one sandbox.
func TestSDKIdempotencyE2E(t *testing.T) {
	c := newClient(t)
	tag := "sdk-idem-" + randHex(6)
	cleanupTagged(t, c, tag)
	rt := &loseFirstResponse{}
	cl := platinum.New(env.url, env.token, platinum.WithHTTPClient(&http.Client{Transport: rt}))
	sb, err := cl.Sandboxes.Create(context.Background(), platinum.CreateSandboxRequest{Template: "busybox", Metadata: map[string]string{"run": tag}})
	if err != nil {
		t.Fatalf("create through a lost answer: %v", err)
	}
	if !rt.lost.Load() {
		t.Fatal("the transport lost no answer; the test proves nothing")
	}
	keys := 0
	rt.keys.Range(func(k, v any) bool {
		keys++
		if n := v.(*atomic.Int32).Load(); n != 2 {
			t.Errorf("key %v sent %d times, want 2 (the request and its retry)", k, n)
		}
		return true
	})
	if keys != 1 {
		t.Errorf("%d keys, want 1", keys)
	}
	if n := countTagged(t, c, tag); n != 1 {
		t.Errorf("%d sandboxes, want 1 (%s)", n, sb.ID)
	}
	// A caller's own key: the same key again returns the same sandbox.
	key := platinum.NewIdempotencyKey()
	a, err := cl.Sandboxes.Create(context.Background(), platinum.CreateSandboxRequest{Template: "busybox", Metadata: map[string]string{"run": tag}, IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cl.Sandboxes.Create(context.Background(), platinum.CreateSandboxRequest{Template: "busybox", Metadata: map[string]string{"run": tag}, IdempotencyKey: key})
	if err != nil || b.ID != a.ID {
		t.Errorf("same caller key: %v %v, want %s", b, err, a.ID)
	}
	_, err = cl.Sandboxes.Create(context.Background(), platinum.CreateSandboxRequest{Template: "busybox", CPU: 2, Metadata: map[string]string{"run": tag}, IdempotencyKey: key})
	var ae *platinum.APIError
	if !errors.As(err, &ae) || ae.Code != platinum.CodeIdempotencyKeyReused {
		t.Errorf("same caller key, other request: %v, want %s", err, platinum.CodeIdempotencyKeyReused)
	}
}

// TestIdempotentExecStopsWithClientE2E: a keyed request runs to its end
// when its client goes away, except a command, which lives only as long as
// its client listens (as without a key).
func TestIdempotentExecStopsWithClientE2E(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	id := c.create(map[string]any{"template": "busybox"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"cmd": "sleep 3001", "timeout_ms": 600000})
	req, _ := http.NewRequestWithContext(ctx, "POST", env.url+"/v1/sandboxes/"+id+"/exec", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Idempotency-Key", "exec-"+randHex(8))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("sleep 3001 answered %d", resp.StatusCode)
	}
	for i := 0; ; i++ {
		out := c.mustSh(id, "ps -o args | grep -c '^sleep 3001' || true")
		if strings.TrimSpace(out) == "0" {
			return
		}
		if i == 100 {
			t.Fatalf("the command outlived its client: %q", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
