package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/crashpoint"
	"github.com/platinum-dev/platinum/internal/requestid"
)

// Idempotency (docs/api.md): every mutating /v1 call (POST, PUT, PATCH,
// DELETE) takes an Idempotency-Key header, or an "idempotency_key" (or
// "idempotencyKey") field in a JSON object body (stripped before the
// handler's strict decoder sees it). The first request with a key runs and its answer is kept for
// 24 hours; a retry with the same key and the same request (method, path,
// query and canonical body, by the same token) gets that answer again with
// Idempotent-Replayed: true. The same key with another request is 409
// idempotency_key_reused. A retry while the first request still runs
// waits for it (up to 30 s, then 409 idempotency_key_in_progress).
//
// Only answers of a request that ran are kept (2xx and 3xx). Every error
// frees the key, so a retry runs again: server errors (5xx) and 409
// conflicts and 429 quota refusals may go another way next time, and a
// refusal of bad input (400, 404, 422, ...) changed nothing, so a client
// may fix the request and send it again under the same key. Answers over
// maxReplayBody bytes (long exec output streams) are not kept either.
//
// It wraps the whole router, so every route added later is covered.

// Header names.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
	bodyIdempotencyKey   = "idempotency_key"
	// bodyIdempotencyKeyCamel is the camelCase spelling, accepted too.
	bodyIdempotencyKeyCamel = "idempotencyKey"
)

// maxReplayBody bounds an answer kept for replay.
const maxReplayBody = 1 << 20

func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// serveIdempotent runs the router under the request's idempotency key.
func (a *API) serveIdempotent(w http.ResponseWriter, r *http.Request) {
	if !mutating(r.Method) || !strings.HasPrefix(r.URL.Path, "/v1/") {
		a.mux.ServeHTTP(w, r)
		return
	}
	key := r.Header.Get(headerIdempotencyKey)
	body, err := readKeyedBody(r, &key)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	defer body.cleanup()
	if key == "" {
		r.Body = body.reader()
		a.mux.ServeHTTP(w, r)
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p, err := a.tn.Authenticate(r.Context(), strings.TrimSpace(tok))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	ctx := context.WithValue(r.Context(), principalKey{}, p)
	r = r.WithContext(ctx)
	begin, err := a.cp.BeginIdempotent(ctx, p, key, requestHash(r, body.hash))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if rp := begin.Replay; rp != nil {
		h := w.Header()
		for k, vs := range rp.Header {
			h[k] = vs
		}
		h.Set(headerReplayed, "true")
		w.WriteHeader(rp.Status)
		w.Write(rp.Body)
		return
	}
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	done := false
	defer func() {
		if done {
			return
		}
		// The handler panicked: free the key, then let net/http log it.
		if err := a.cp.ReleaseIdempotent(context.WithoutCancel(ctx), p, key, begin.Claim); err != nil {
			a.log.WarnContext(ctx, "release idempotency key", "err", err)
		}
	}()
	// The request runs to its end even if the client goes away: a client
	// that timed out retries with the same key, and must find this
	// answer, not a second sandbox. Handlers bound their own waits.
	r = r.WithContext(context.WithValue(controlplane.WithIdempotency(context.WithoutCancel(ctx), begin), clientCtxKey{}, ctx))
	r.Body = body.reader()
	crashpoint.Hit("idempotency.claimed")
	a.mux.ServeHTTP(rec, r)
	done = true
	crashpoint.Hit("idempotency.answered")
	cctx := context.WithoutCancel(ctx)
	if !keepAnswer(rec.status) || rec.overflow {
		if err := a.cp.ReleaseIdempotent(cctx, p, key, begin.Claim); err != nil {
			a.log.WarnContext(ctx, "release idempotency key", "err", err)
		}
		return
	}
	header := map[string][]string{}
	for k, vs := range rec.Header() {
		switch k {
		case "Date", "Content-Length", "Connection", "Transfer-Encoding", requestid.Header:
			continue // a replay is its own request, with its own id
		}
		header[k] = vs
	}
	if err := a.cp.FinishIdempotent(cctx, p, key, begin.Claim, controlplane.IdempotentResponse{Status: rec.status, Header: header, Body: rec.buf.Bytes()}); err != nil {
		a.log.WarnContext(ctx, "keep idempotent answer", "err", err)
	}
}

type clientCtxKey struct{}

// clientContext is the request's context as its client holds it:
// cancelled when the client goes away, even for a keyed request that
// otherwise runs to its end. Work that only makes sense while the client
// listens (a command whose output streams to it) uses it.
func clientContext(r *http.Request) context.Context {
	if ctx, ok := r.Context().Value(clientCtxKey{}).(context.Context); ok {
		return ctx
	}
	return r.Context()
}

// keepAnswer reports whether an answer with status is kept, so a retry
// replays it rather than running again.
func keepAnswer(status int) bool {
	return status < 400
}

// keyedBody is a request body read for its idempotency key and hash:
// in memory when small, spooled to a temporary file when not.
type keyedBody struct {
	mem  []byte
	rest io.ReadCloser // the unread rest of a large body sent without a key
	file *os.File
	hash string // hex SHA-256 of the canonical body
}

func (b *keyedBody) reader() io.ReadCloser {
	switch {
	case b.file != nil:
		return b.file
	case b.rest != nil:
		return struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b.mem), b.rest), b.rest}
	}
	return io.NopCloser(bytes.NewReader(b.mem))
}

func (b *keyedBody) cleanup() {
	if b.file != nil {
		b.file.Close()
		os.Remove(b.file.Name())
	}
}

// readKeyedBody reads r's body. A JSON object body with an
// "idempotency_key" string field loses that field, which becomes *key
// (it must agree with a header key). Bodies over maxJSONBody are spooled
// to a temporary file; they are hashed only when a key was given.
func readKeyedBody(r *http.Request, key *string) (*keyedBody, error) {
	b := &keyedBody{}
	if r.Body == nil || r.Body == http.NoBody {
		b.hash = hashBytes(nil)
		return b, nil
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, maxJSONBody+1))
	if err != nil {
		return nil, badRequest("reading the request body: "+err.Error(), "")
	}
	if len(head) > maxJSONBody {
		// Large (a file upload): no body field to look for.
		if *key == "" {
			return &keyedBody{mem: head, rest: r.Body}, nil
		}
		return spool(head, r.Body)
	}
	b.mem = head
	canon := head
	if jsonBody(r) && looksJSONObject(head) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(head, &obj) == nil {
			stripped := false
			for _, name := range []string{bodyIdempotencyKey, bodyIdempotencyKeyCamel} {
				raw, ok := obj[name]
				if !ok {
					continue
				}
				var k string
				if err := json.Unmarshal(raw, &k); err != nil {
					return nil, badRequest(name+" must be a string", name)
				}
				if *key != "" && *key != k {
					// A header and a field, or both spellings of the field.
					return nil, badRequest("the idempotency keys given (Idempotency-Key header, idempotency_key, idempotencyKey) differ; send one", name)
				}
				*key = k
				delete(obj, name)
				stripped = true
			}
			if stripped {
				if b.mem, err = json.Marshal(obj); err != nil {
					return nil, err
				}
			}
			canon = canonicalJSON(b.mem)
		}
	}
	b.hash = hashBytes(canon)
	return b, nil
}

// spool writes head and the rest of body to a temporary file, hashing
// what it writes, and returns the file rewound.
func spool(head []byte, body io.Reader) (*keyedBody, error) {
	f, err := os.CreateTemp("", "pt-idem-*")
	if err != nil {
		return nil, fmt.Errorf("spool request body: %w", err)
	}
	h := sha256.New()
	w := io.MultiWriter(f, h)
	_, err = w.Write(head)
	if err == nil {
		_, err = io.Copy(w, body)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, badRequest("reading the request body: "+err.Error(), "")
	}
	return &keyedBody{file: f, hash: hex.EncodeToString(h.Sum(nil))}, nil
}

// jsonBody reports whether r's body is a JSON document the idempotency
// layer may look into (and strip the key field from): a JSON, form (curl
// -d) or unset Content-Type, and never a file upload (PUT …/files), whose
// bytes are the file's and pass untouched.
func jsonBody(r *http.Request) bool {
	if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/files") {
		return false
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "" || mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "application/x-www-form-urlencoded"
}

func looksJSONObject(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] == '{'
}

// canonicalJSON re-encodes a JSON document with sorted object keys and
// no insignificant space (numbers kept as written), so two bodies that
// mean the same thing hash the same.
func canonicalJSON(b []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}

func hashBytes(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// requestHash identifies a request for its idempotency key: method, path,
// query (sorted) and body hash.
func requestHash(r *http.Request, bodyHash string) string {
	return hashBytes([]byte(r.Method + "\n" + r.URL.Path + "\n" + r.URL.Query().Encode() + "\n" + bodyHash))
}

// recorder passes a response through and keeps a copy for replay (up to
// maxReplayBody bytes; past that it only passes through).
type recorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	buf         bytes.Buffer
	overflow    bool
}

func (r *recorder) WriteHeader(status int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wroteHeader = true
	if !r.overflow {
		if r.buf.Len()+len(p) > maxReplayBody {
			r.overflow = true
			r.buf = bytes.Buffer{}
		} else {
			r.buf.Write(p)
		}
	}
	return r.ResponseWriter.Write(p)
}

// Flush streams (exec output) through.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
