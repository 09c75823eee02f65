package platinum

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
)

// IdempotencyKeyHeader is the header ptd reads an idempotency key from.
// A retry of a mutating call with the same key and the same request gets
// the first answer (for 24 hours) instead of running again; the same key
// with another request is an APIError with code idempotency_key_reused.
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader is "true" on an answer ptd replayed for a retried key.
const ReplayedHeader = "Idempotent-Replayed"

type idemKeyCtx struct{}

// WithIdempotencyKey makes the mutating call made with ctx use key as its
// idempotency key instead of a generated one: a caller that retries a
// whole operation itself (after a crash, say) passes the same key again
// and gets the first result. Use one key per logical call.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idemKeyCtx{}, key)
}

// WithRetries sets how many times a mutating call is retried, with the
// same idempotency key, after a network error, a 502/503/504 or a 409
// idempotency_key_in_progress (default 2; 0 disables). Calls without a
// key (see WithoutIdempotencyKeys) and reads are never retried. Between
// attempts the Client waits as retry.go says: the answer's Retry-After
// when it has one, plus an exponential backoff with full jitter, and never
// past the call's context deadline.
func WithRetries(n int) Option {
	return func(c *Client) {
		if n >= 0 {
			c.retries = n
		}
	}
}

// WithoutIdempotencyKeys stops the Client from generating an idempotency
// key for every mutating call (keys set with WithIdempotencyKey are still
// sent).
func WithoutIdempotencyKeys() Option {
	return func(c *Client) { c.noAutoKeys = true }
}

// NewIdempotencyKey returns a fresh random key, as the Client generates.
func NewIdempotencyKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "ptk_" + hex.EncodeToString(b)
}

func isMutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// setIdempotencyKey gives a mutating request its key: the context's, or
// a generated one (not for streamed bodies). The key stays on the
// request, so retries reuse it.
func (c *Client) setIdempotencyKey(ctx context.Context, req *http.Request) {
	if !isMutating(req.Method) {
		return
	}
	if k, _ := ctx.Value(idemKeyCtx{}).(string); k != "" {
		req.Header.Set(IdempotencyKeyHeader, k)
		return
	}
	// A streamed body (a file upload) cannot be sent twice, so the Client
	// never retries it, and a key would only make ptd spool it to hash it.
	streamed := req.Body != nil && req.Body != http.NoBody && req.GetBody == nil
	if !c.noAutoKeys && !streamed {
		req.Header.Set(IdempotencyKeyHeader, NewIdempotencyKey())
	}
}

// shouldRetry reports whether an answer says "the same request may work
// if sent again". It may read resp's body; it leaves it readable.
func (c *Client) shouldRetry(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusConflict:
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		var body struct {
			Code string `json:"code"`
		}
		json.Unmarshal(raw, &body)
		return body.Code == CodeIdempotencyKeyInProgress
	}
	return false
}

// Error codes of idempotent calls and quotas.
const (
	// CodeIdempotencyKeyReused: the key was first used with another
	// request (method, path or body); use a new key for a new request.
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	// CodeIdempotencyKeyInProgress: the first request with the key still
	// runs; the Client retries it by itself (WithRetries).
	CodeIdempotencyKeyInProgress = "idempotency_key_in_progress"
)

// CodeQuotaExceeded: the org's (or the sandbox tree's) limit on active
// sandboxes, cpu or ram_mb would be passed (HTTP 429); Body names "limit",
// "max" and "scope" (org or tree).
const CodeQuotaExceeded = "quota_exceeded"
