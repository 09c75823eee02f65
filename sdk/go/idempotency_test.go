package platinum_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// keyServer answers each request with the next of answers (status, code)
// and records the Idempotency-Key and body of every request.
type keyServer struct {
	mu      sync.Mutex
	answers []int
	keys    []string
	bodies  []string
}

func (k *keyServer) client(t *testing.T, opts ...platinum.Option) *platinum.Client {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		k.mu.Lock()
		k.keys = append(k.keys, r.Header.Get("Idempotency-Key"))
		k.bodies = append(k.bodies, string(b))
		status := 201
		if len(k.answers) > 0 {
			status, k.answers = k.answers[0], k.answers[1:]
		}
		k.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		switch status {
		case 409:
			io.WriteString(w, `{"code":"idempotency_key_in_progress","error":"running"}`)
		case 503:
			io.WriteString(w, `{"code":"unavailable","error":"busy"}`)
		default:
			io.WriteString(w, `{"id":"sbx_1","state":"creating"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return platinum.New(srv.URL, "t", opts...)
}

func TestSDKIdempotencyKeys(t *testing.T) {
	tests := []struct {
		name    string
		answers []int
		opts    []platinum.Option
		ctxKey  string // WithIdempotencyKey
		reqKey  string // CreateSandboxRequest.IdempotencyKey
		wantErr bool
		// wantCalls is how many requests reached the server; every one of
		// them must carry the same key.
		wantCalls int
		wantKey   string // "" = generated (non-empty)
	}{
		{name: "generated key", wantCalls: 1},
		{name: "retries reuse the key", answers: []int{503, 409}, wantCalls: 3},
		{name: "retries run out", answers: []int{503, 503, 503}, wantCalls: 3, wantErr: true},
		{name: "no retries", answers: []int{503}, opts: []platinum.Option{platinum.WithRetries(0)}, wantCalls: 1, wantErr: true},
		{name: "caller key from the request", reqKey: "mine", answers: []int{503}, wantCalls: 2, wantKey: "mine"},
		{name: "caller key from the context", ctxKey: "ctx-key", wantCalls: 1, wantKey: "ctx-key"},
		{name: "keys off: no key, no retry", answers: []int{503}, opts: []platinum.Option{platinum.WithoutIdempotencyKeys()}, wantCalls: 1, wantErr: true, wantKey: "-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ks := &keyServer{answers: tc.answers}
			c := ks.client(t, tc.opts...)
			ctx := context.Background()
			if tc.ctxKey != "" {
				ctx = platinum.WithIdempotencyKey(ctx, tc.ctxKey)
			}
			_, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", IdempotencyKey: tc.reqKey})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if len(ks.keys) != tc.wantCalls {
				t.Fatalf("%d requests, want %d", len(ks.keys), tc.wantCalls)
			}
			want := tc.wantKey
			switch want {
			case "":
				want = ks.keys[0]
				if !strings.HasPrefix(want, "ptk_") {
					t.Errorf("generated key %q", want)
				}
			case "-":
				want = ""
			}
			for i, k := range ks.keys {
				if k != want {
					t.Errorf("request %d key %q, want %q", i, k, want)
				}
				if strings.Contains(ks.bodies[i], "idempotency") || ks.bodies[i] != ks.bodies[0] {
					t.Errorf("request %d body %s (first %s)", i, ks.bodies[i], ks.bodies[0])
				}
			}
		})
	}
}

// TestSDKKeyPerCall: two calls get two keys; reads carry none.
func TestSDKKeyPerCall(t *testing.T) {
	ks := &keyServer{}
	c := ks.client(t)
	ctx := context.Background()
	c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"})
	c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"})
	c.Sandboxes.Get(ctx, "sbx_1")
	if len(ks.keys) != 3 || ks.keys[0] == "" || ks.keys[0] == ks.keys[1] || ks.keys[2] != "" {
		t.Errorf("keys = %q, want two distinct keys then none", ks.keys)
	}
	var ae *platinum.APIError
	ks.answers = []int{409, 409, 409}
	_, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"})
	if !errors.As(err, &ae) || ae.Code != platinum.CodeIdempotencyKeyInProgress {
		t.Errorf("err = %v, want %s after the retries", err, platinum.CodeIdempotencyKeyInProgress)
	}
	if n := len(ks.keys) - 3; n != 3 {
		t.Errorf("in-progress: %d requests, want 3 (two retries)", n)
	}
}

// TestSDKNoKeyOnStreamedUploads: an upload streams its body once, so the
// Client neither retries it nor gives it a generated key (which would
// make ptd spool it to hash it); a caller's key is still sent.
func TestSDKNoKeyOnStreamedUploads(t *testing.T) {
	ks := &keyServer{}
	c := ks.client(t)
	c.Sandboxes.Upload(context.Background(), "sbx_1", "/tmp/x", strings.NewReader("data"))
	c.Sandboxes.Upload(platinum.WithIdempotencyKey(context.Background(), "up-1"), "sbx_1", "/tmp/x", strings.NewReader("data"))
	if len(ks.keys) != 2 || ks.keys[0] != "" || ks.keys[1] != "up-1" {
		t.Errorf("upload keys = %q, want none then the caller's", ks.keys)
	}
}
