package daytona

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// sdkSignature is the 0.218 SDK's computeFileUrlSignature, written out
// from its source (utils/fileUrlSigning.js) so the test checks ours
// against the client's, not against itself.
func sdkSignature(key, method, path string, expires int64) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("v1:files:" + method + ":" + path + ":" + strconv.FormatInt(expires, 10)))
	return "v1_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// TestSignedURL: a URL the SDK signs with the sandbox's key passes for
// its operation and path until it expires (0: never); another path,
// method, key generation or sandbox, or an expired URL, does not.
func TestSignedURL(t *testing.T) {
	sb := sandbox.Sandbox{ID: "sbx_1", AgentToken: "agent-secret", Metadata: map[string]string{}}
	key := signingKey(sb)
	now := time.Unix(1_800_000_000, 0)
	req := func(method, route, path string, expires int64, sig string) (string, error) {
		q := url.Values{"path": {path}, "expires": {strconv.FormatInt(expires, 10)}, "signature": {sig}}
		r := httptest.NewRequest(method, "/daytona/toolbox/sbx_1"+route+"?"+q.Encode(), nil)
		op := signedOperation(method, route)
		if op == "" {
			return "", nil
		}
		return op, verifySignedURL(r, key, op, now)
	}
	later := now.Unix() + 60
	for _, c := range []struct {
		name, method, route, path string
		expires                   int64
		sig                       string
		ok                        bool
	}{
		{"download", "GET", "/files/download", "/root/a b.txt", later, sdkSignature(key, "GET", "/root/a b.txt", later), true},
		{"download HEAD", "HEAD", "/files/download", "/root/a", later, sdkSignature(key, "GET", "/root/a", later), true},
		{"upload", "POST", "/files/upload-v2", "/root/up", later, sdkSignature(key, "POST", "/root/up", later), true},
		{"never expires", "GET", "/files/download", "/root/a", 0, sdkSignature(key, "GET", "/root/a", 0), true},
		{"expired", "GET", "/files/download", "/root/a", now.Unix() - 1, sdkSignature(key, "GET", "/root/a", now.Unix()-1), false},
		{"other path", "GET", "/files/download", "/etc/shadow", later, sdkSignature(key, "GET", "/root/a", later), false},
		{"upload signature used to download", "GET", "/files/download", "/root/up", later, sdkSignature(key, "POST", "/root/up", later), false},
		{"expiry moved", "GET", "/files/download", "/root/a", later + 3600, sdkSignature(key, "GET", "/root/a", later), false},
		{"another key", "GET", "/files/download", "/root/a", later, sdkSignature("other", "GET", "/root/a", later), false},
	} {
		op, err := req(c.method, c.route, c.path, c.expires, c.sig)
		if op == "" || (err == nil) != c.ok {
			t.Errorf("%s: op %q err %v, want ok %v", c.name, op, err, c.ok)
		}
	}
	for _, route := range []string{"/process/execute", "/files", "/files/bulk-download", "/env"} {
		if op := signedOperation("POST", route); op != "" {
			t.Errorf("%s reachable by a signed URL", route)
		}
	}
	// A rotation, or another sandbox, gives another key.
	rotated := sb
	rotated.Metadata = map[string]string{labelSigningGen: "1"}
	other := sb
	other.ID = "sbx_2"
	if signingKey(rotated) == key || signingKey(other) == key || signingKey(sb) != key {
		t.Errorf("keys: %s %s %s", key, signingKey(rotated), signingKey(other))
	}
}
