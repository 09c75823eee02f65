package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		addr         string
		allowPrivate bool
		ok           bool
	}{
		{"93.184.216.34", false, true},
		{"2606:2800:220:1::1", false, true},
		{"127.0.0.1", false, false},
		{"127.0.0.1", true, true},
		{"::1", false, false},
		{"10.1.2.3", false, false},
		{"192.168.1.1", true, true},
		{"100.96.0.5", false, false}, // the sandbox subnet
		{"169.254.169.254", false, false},
		{"169.254.169.254", true, false}, // metadata: never
		{"fe80::1", true, false},
		{"0.0.0.0", true, false},
		{"::", true, false},
		{"224.0.0.1", true, false},
		{"::ffff:127.0.0.1", false, false},
	}
	for _, tc := range tests {
		err := CheckAddr(netip.MustParseAddr(tc.addr), tc.allowPrivate)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%s, %v) = %v, want ok=%v", tc.addr, tc.allowPrivate, err, tc.ok)
		}
	}
}

func TestSign(t *testing.T) {
	body := []byte(`{"id":1}`)
	at := time.Unix(1700000000, 0)
	mac := hmac.New(sha256.New, []byte("secret"))
	mac.Write([]byte("1700000000.{\"id\":1}"))
	want := "t=1700000000,v1=" + hex.EncodeToString(mac.Sum(nil))
	if got := Sign("secret", at, body); got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
}

func TestPost(t *testing.T) {
	var gotSig, gotHdr string
	var gotBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotSig, gotHdr = r.Header.Get(SignatureHeader), r.Header.Get("X-Pt-Event")
		gotBody, _ = io.ReadAll(r.Body)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	ctx := context.Background()
	body := []byte(`{"id":7}`)

	status, err := NewClient(true, 5*time.Second).Post(ctx, srv.URL, "s3cret", map[string]string{"X-Pt-Event": "hello"}, body)
	if err != nil || status != http.StatusAccepted || gotHdr != "hello" || string(gotBody) != string(body) {
		t.Fatalf("post = %d %v; header %q body %q", status, err, gotHdr, gotBody)
	}
	ts := strings.TrimPrefix(strings.Split(gotSig, ",")[0], "t=")
	if !strings.HasPrefix(gotSig, "t=") || !strings.Contains(gotSig, ",v1=") || gotSig != Sign("s3cret", parseUnix(t, ts), body) {
		t.Errorf("signature %q does not verify", gotSig)
	}
	if status, err := NewClient(true, 5*time.Second).Post(ctx, srv.URL+"/redirect", "s", nil, body); err == nil || status != http.StatusFound {
		t.Errorf("redirect: %d %v, want a failure with 302 (not followed)", status, err)
	}
	// Loopback is refused at dial time without allowPrivate, whatever the URL says.
	gotBody = nil
	_, err = NewClient(false, 5*time.Second).Post(ctx, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), "s", nil, body)
	if !errors.Is(err, sandbox.ErrInvalidArgument) || gotBody != nil {
		t.Errorf("loopback without allowPrivate: %v (body reached: %v)", err, gotBody != nil)
	}
}

func parseUnix(t *testing.T, s string) time.Time {
	t.Helper()
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("timestamp %q", s)
		}
		n = n*10 + int64(c-'0')
	}
	return time.Unix(n, 0)
}
