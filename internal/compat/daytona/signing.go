package daytona

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Signed toolbox URLs (sandbox.downloadUrl / uploadUrl): the SDK signs
// "v1:files:<METHOD>:<path>:<expires>" with the sandbox's signing key
// (HMAC-SHA256, base64url, prefixed v1_) and anyone holding the URL may
// GET /files/download or POST /files/upload-v2 for that path until it
// expires (0: never), without the API key. ptd checks the signature here;
// pt-agent then serves the call as any other. The key is derived from the
// sandbox's agent token and a generation kept in its metadata, so it is
// stored nowhere, survives stops and starts, and rotating it (the
// generation moves on) voids every URL signed before.

// signingKey is the sandbox's current file URL signing key.
func signingKey(sb sandbox.Sandbox) string {
	m := hmac.New(sha256.New, []byte(sb.AgentToken))
	fmt.Fprintf(m, "daytona-file-url-key:%s:%s", sb.ID, sb.Metadata[labelSigningGen])
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// fileURLSignature is the SDK's signature of one operation.
func fileURLSignature(key, method, path string, expires int64) string {
	m := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(m, "v1:files:%s:%s:%d", method, path, expires)
	return "v1_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// signedOperation is the method a signed route is signed for, "" when the
// route cannot be reached by a signed URL.
func signedOperation(method, route string) string {
	switch {
	case route == "/files/download" && (method == http.MethodGet || method == http.MethodHead):
		return http.MethodGet
	case route == "/files/upload-v2" && method == http.MethodPost:
		return http.MethodPost
	}
	return ""
}

// verifySignedURL checks r's path, expires and signature query parameters
// against key for operation op at time now.
func verifySignedURL(r *http.Request, key, op string, now time.Time) error {
	q := r.URL.Query()
	expires, err := strconv.ParseInt(q.Get("expires"), 10, 64)
	if err != nil || expires < 0 {
		return fmt.Errorf("expires must be a Unix time (0: never)")
	}
	if expires != 0 && now.Unix() > expires {
		return fmt.Errorf("the URL expired at %s", time.Unix(expires, 0).UTC().Format(time.RFC3339))
	}
	want := fileURLSignature(key, op, q.Get("path"), expires)
	if subtle.ConstantTimeCompare([]byte(want), []byte(q.Get("signature"))) != 1 {
		return fmt.Errorf("the signature does not match (a rotated key voids earlier URLs)")
	}
	return nil
}

// getSigningKey is GET /sandbox/{id}/signing-key: the key as a JSON
// string.
func (h *Handler) getSigningKey(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	sb, err := h.lookup(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, signingKey(sb))
	return nil
}

// rotateSigningKey is POST /sandbox/{id}/signing-key/rotate: a new key
// (the old one's URLs stop working at once), answered as a JSON string.
func (h *Handler) rotateSigningKey(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	ctx := r.Context()
	sb, err := h.lookup(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	sb, err = h.editMetadata(ctx, p, sb, func(md map[string]string) {
		gen, _ := strconv.Atoi(md[labelSigningGen])
		md[labelSigningGen] = strconv.Itoa(gen + 1)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, signingKey(sb))
	return nil
}
