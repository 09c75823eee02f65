package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// hookReceiver is a webhook endpoint on loopback that answers 500 to its
// first `fail` requests.
type hookReceiver struct {
	mu    sync.Mutex
	fail  int
	calls []hookCall
	ok    chan hookCall
}

type hookCall struct {
	status  int
	sig     string
	eventID string
	body    []byte
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	c := hookCall{status: http.StatusOK, sig: r.Header.Get("X-Pt-Signature"), eventID: r.Header.Get("X-Pt-Event-Id"), body: b}
	if len(h.calls) < h.fail {
		c.status = http.StatusInternalServerError
	}
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	w.WriteHeader(c.status)
	if c.status == http.StatusOK {
		h.ok <- c
	}
}

// TestWebhooks registers a webhook on a loopback receiver that fails its
// first two requests, and checks the retried delivery arrives signed,
// the deliveries API records the attempts, and another org cannot see it.
func TestWebhooks(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	rcv := &hookReceiver{fail: 2, ok: make(chan hookCall, 1000)}
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	// Refused targets change nothing.
	for _, u := range []string{"http://169.254.169.254/latest/meta-data", "ftp://127.0.0.1/x", "not a url"} {
		if r := c.do("POST", "/v1/webhooks", map[string]any{"url": u}); r.Status != 400 || r.JSON()["field"] != "url" {
			t.Errorf("url %q: %d %s", u, r.Status, r.Body)
		}
	}

	r := c.do("POST", "/v1/webhooks", map[string]any{"url": srv.URL + "/hook", "events": []string{"state_changed"}})
	if r.Status != 201 {
		t.Fatalf("create webhook: %d %s", r.Status, r.Body)
	}
	hook := r.JSON()
	hid, secret := hook["id"].(string), hook["secret"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/webhooks/"+hid, nil) })
	if !strings.HasPrefix(hid, "whk_") || len(secret) < 16 {
		t.Fatalf("webhook = %s", r.Body)
	}
	if r := c.do("GET", "/v1/webhooks/"+hid, nil); r.Status != 200 || r.JSON()["secret"] != nil {
		t.Errorf("get webhook: %d %s (the secret must not be shown again)", r.Status, r.Body)
	}

	id := c.create(map[string]any{"template": "busybox"})

	// Wait for this sandbox's creating→running delivery (other tests'
	// sandboxes are delivered too).
	var got hookCall
	for deadline := time.After(3 * time.Minute); ; {
		select {
		case got = <-rcv.ok:
		case <-deadline:
			t.Fatal("no delivery of the sandbox's start within 3 minutes")
		}
		var e struct {
			Type      string `json:"type"`
			SandboxID string `json:"sandbox_id"`
			Data      struct{ From, To string }
		}
		if err := json.Unmarshal(got.body, &e); err != nil {
			t.Fatalf("delivery body %s: %v", got.body, err)
		}
		if e.Type != "state_changed" {
			t.Fatalf("delivered a %s event to a state_changed webhook", e.Type)
		}
		if e.SandboxID == id && e.Data.To == "running" {
			break
		}
	}
	if err := platinum.VerifyWebhook(secret, got.sig, got.body, 0); err != nil {
		t.Errorf("signature of %s: %v", got.body, err)
	}
	if err := platinum.VerifyWebhook("whsec_wrong_secret_0000", got.sig, got.body, 0); !errors.Is(err, platinum.ErrBadSignature) {
		t.Errorf("a wrong secret verifies: %v", err)
	}
	tampered := append([]byte{}, got.body...)
	tampered[len(tampered)-2] ^= 1
	if err := platinum.VerifyWebhook(secret, got.sig, tampered, 0); !errors.Is(err, platinum.ErrBadSignature) {
		t.Errorf("a tampered body verifies: %v", err)
	}

	// The first two requests failed; the event the first carried is
	// retried (same event ID) until it is accepted. Other tests' events
	// share the webhook and its workers, so the retry may come later than
	// this sandbox's delivery: wait for it.
	var first string
	var sends int
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		rcv.mu.Lock()
		calls := append([]hookCall{}, rcv.calls...)
		rcv.mu.Unlock()
		if len(calls) < 3 || calls[0].status != 500 || calls[1].status != 500 {
			t.Fatalf("calls = %+v", calls)
		}
		first, sends = calls[0].eventID, 0
		for _, cl := range calls {
			if cl.eventID == first {
				sends++
				if err := platinum.VerifyWebhook(secret, cl.sig, cl.body, 0); err != nil {
					t.Errorf("retry signature: %v", err)
				}
			}
		}
		if sends >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if sends < 2 {
		t.Errorf("event %s was sent %d times, want a retry after the failure", first, sends)
	}

	cl := platinum.New(env.url, env.token)
	var retried *platinum.WebhookDelivery
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ds, err := cl.Webhooks.Deliveries(t.Context(), hid)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range ds {
			if d.Status == "delivered" && d.Attempts >= 2 && d.LastStatus == 200 {
				retried = &ds[i]
			}
		}
		if retried != nil {
			break
		}
	}
	if retried == nil {
		t.Fatal("no delivery recorded as delivered after a retry")
	}

	// Another org neither sees nor deletes it.
	_, other := createOrg(t, c, "hooks-other-"+randHex(3))
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/webhooks/" + hid}, {"DELETE", "/v1/webhooks/" + hid}, {"GET", "/v1/webhooks/" + hid + "/deliveries"},
	} {
		if r := other.do(tc.method, tc.path, nil); r.Status != 404 {
			t.Errorf("other org %s %s: %d %s", tc.method, tc.path, r.Status, r.Body)
		}
	}
	if r := other.do("GET", "/v1/webhooks", nil); strings.Contains(string(r.Body), hid) {
		t.Errorf("other org lists the webhook: %s", r.Body)
	}

	// Deleted: gone from the list, 404 after.
	if r := c.do("DELETE", "/v1/webhooks/"+hid, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := c.do("GET", "/v1/webhooks/"+hid, nil); r.Status != 404 {
		t.Errorf("deleted webhook: %d", r.Status)
	}
}
