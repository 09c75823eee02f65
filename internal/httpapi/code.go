package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/upstream"
)

// The code routes are a thin layer over the code-interpreter server inside
// the sandbox (docs/code-interpreter.md): ptd checks the request (so a
// refused call reaches no kernel), finds the sandbox for the caller's org,
// and relays the server's own /v1 answers, NDJSON streamed line by line.

type runCodeBody struct {
	Code      *string           `json:"code"`
	Language  string            `json:"language,omitempty"`
	ContextID string            `json:"context_id,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	TimeoutMS *int64            `json:"timeout_ms,omitempty"`
}

type codeContextBody struct {
	Language string `json:"language,omitempty"`
	Cwd      string `json:"cwd,omitempty"`
}

// codeLanguages are the languages the API names.
var codeLanguages = map[string]bool{"python": true, "javascript": true, "typescript": true, "bash": true}

func checkLanguage(lang string) error {
	if lang == "" || codeLanguages[lang] {
		return nil
	}
	return badRequest(fmt.Sprintf("unknown language %q: use python, javascript, typescript or bash", lang), "language")
}

// codeClient reaches code-interpreter servers; dials are retried briefly
// because a sandbox that just booted starts its server a moment later.
// Connections are kept between calls, pooled per sandbox boot: the URL's
// host is the server's upstream.Host name (internal/upstream), so a
// connection kept to one boot is never handed to the next sandbox that
// gets the address, nor to the same sandbox after a stop and start, whose
// network would reset a POST sent on it. A new connection per call cost
// a dial and, in the sandbox's server, a thread and its setup on every
// cell: about a millisecond of a steady-state round trip of a few
// (docs/code-interpreter.md, "Performance").
var codeClient = &http.Client{Transport: &http.Transport{
	DialContext:         dialRetry,
	MaxIdleConnsPerHost: 4,
	IdleConnTimeout:     30 * time.Second,
	DisableCompression:  true,
}}

// codeDialWait bounds how long a refused dial is retried.
const codeDialWait = 20 * time.Second

type dialRetryKey struct{}

// dialRetry dials addr (an upstream.Host name or a plain address),
// retrying refusals for codeDialWait when the context says the server is
// expected there.
func dialRetry(ctx context.Context, network, addr string) (net.Conn, error) {
	addr, err := upstream.Addr(addr)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	if retry, _ := ctx.Value(dialRetryKey{}).(bool); !retry {
		return d.DialContext(ctx, network, addr)
	}
	deadline := time.Now().Add(codeDialWait)
	for {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (a *API) runCode(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b runCodeBody
	// JSON escapes can make a 1 MiB cell up to six times longer.
	if err := decodeJSONLimit(r, &b, false, 6*controlplane.MaxCodeBytes+64<<10); err != nil {
		return err
	}
	switch {
	case b.Code == nil:
		return badRequest("code is required", "code")
	case len(*b.Code) > controlplane.MaxCodeBytes:
		return &apiError{status: http.StatusRequestEntityTooLarge, code: "payload_too_large",
			msg: fmt.Sprintf("code is %d bytes; the limit is %d", len(*b.Code), controlplane.MaxCodeBytes), extra: map[string]any{"field": "code"}}
	case b.TimeoutMS != nil && *b.TimeoutMS <= 0:
		return badRequest("timeout_ms must be a positive integer", "timeout_ms")
	}
	if err := checkLanguage(b.Language); err != nil {
		return err
	}
	if err := controlplane.ValidateEnv(b.Env); err != nil {
		return err
	}
	stream := true
	if v := r.URL.Query().Get("stream"); v != "" {
		s, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("stream must be true or false", "stream")
		}
		stream = s
	}
	body, _ := json.Marshal(b)
	// The cell lives as long as its client: a disconnect cancels this
	// request, which closes the server's connection, which interrupts it.
	resp, release, err := a.codeCallOK(r, p, http.MethodPost, "/v1/execute", body, false)
	if err != nil {
		return err
	}
	defer release()
	if eid := resp.Header.Get("X-Execution-Id"); eid != "" {
		w.Header().Set("X-Execution-Id", eid)
	}
	if stream {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		// The headers (X-Execution-Id) go out now, not with the first
		// event: a cell waiting for its context may send none for long.
		_ = rc.Flush()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 256<<20)
		ended := false
		for sc.Scan() {
			ended = ended || isEndEvent(sc.Bytes())
			w.Write(sc.Bytes())
			w.Write([]byte("\n"))
			_ = rc.Flush()
		}
		if !ended && r.Context().Err() == nil {
			for _, ev := range lostEvents(resp.Header.Get("X-Execution-Id"), sc.Err()) {
				b, _ := json.Marshal(ev)
				w.Write(append(b, '\n'))
			}
		}
		return nil
	}
	doc, err := collectCode(resp.Body)
	if err != nil {
		return fmt.Errorf("code interpreter answer: %w", err)
	}
	writeJSON(w, http.StatusOK, doc)
	return nil
}

// codeEvent is one event, kept as it came.
type codeEvent map[string]any

// isEndEvent reports whether line is the server's `end` event.
func isEndEvent(line []byte) bool {
	if !bytes.Contains(line, []byte(`"end"`)) {
		return false
	}
	var ev struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(line, &ev) == nil && ev.Type == "end"
}

// lostEvents end a cell whose answer broke off before its `end` (the
// sandbox's server or the sandbox went away mid-cell): an error that says
// so, then the `end` every stream finishes with, so a client never takes
// a cut answer for a cell that printed nothing.
func lostEvents(execID string, cause error) []codeEvent {
	why := "the connection closed"
	if cause != nil {
		why = cause.Error()
	}
	return []codeEvent{
		{"type": "error", "name": "CodeInterpreterLost", "traceback": "",
			"value": "the sandbox's code interpreter stopped answering before the cell ended (" + why + "); the cell's outcome is unknown"},
		{"type": "end", "execution_id": execID, "execution_count": nil, "status": "error", "duration_ms": 0},
	}
}

// collectCode folds a cell's events into the ?stream=false document.
func collectCode(r io.Reader) (map[string]any, error) {
	doc := map[string]any{"events": []codeEvent{}, "stdout": "", "stderr": "", "results": []codeEvent{}, "error": nil,
		"execution_id": "", "context_id": "", "execution_count": nil, "status": "", "duration_ms": 0}
	var events, results []codeEvent
	var stdout, stderr bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for sc.Scan() {
		var ev codeEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, err
		}
		events = append(events, ev)
		switch ev["type"] {
		case "stdout":
			s, _ := ev["text"].(string)
			stdout.WriteString(s)
		case "stderr":
			s, _ := ev["text"].(string)
			stderr.WriteString(s)
		case "result":
			results = append(results, ev)
		case "error":
			doc["error"] = ev
		case "end":
			for _, k := range []string{"execution_id", "context_id", "execution_count", "status", "duration_ms"} {
				doc[k] = ev[k]
			}
		}
	}
	if doc["status"] == "" {
		// The answer broke off: say so, as a stream would.
		for _, ev := range lostEvents(doc["execution_id"].(string), sc.Err()) {
			events = append(events, ev)
			if ev["type"] == "error" {
				doc["error"] = ev
			} else {
				doc["execution_id"], doc["status"] = ev["execution_id"], ev["status"]
			}
		}
	}
	if events != nil {
		doc["events"] = events
	}
	if results != nil {
		doc["results"] = results
	}
	doc["stdout"], doc["stderr"] = stdout.String(), stderr.String()
	return doc, nil
}

func (a *API) createCodeContext(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b codeContextBody
	if err := decodeJSON(r, &b, true); err != nil {
		return err
	}
	if err := checkLanguage(b.Language); err != nil {
		return err
	}
	body, _ := json.Marshal(b)
	return a.relayCode(w, r, p, http.MethodPost, "/v1/contexts", body)
}

func (a *API) listCodeContexts(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return a.relayCodeList(w, r, p, "/v1/contexts", "contexts")
}

func (a *API) listCodeExecutions(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return a.relayCodeList(w, r, p, "/v1/executions", "executions")
}

// deleteCodeExecution stops a running cell; the server answers once it
// has ended (docs/code-interpreter.md, "Interrupts").
func (a *API) deleteCodeExecution(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return a.relayCode(w, r, p, http.MethodDelete, "/v1/executions/"+url.PathEscape(r.PathValue("exec")), nil)
}

// relayCodeList answers {key: [...]} with the server's JSON array at path.
func (a *API) relayCodeList(w http.ResponseWriter, r *http.Request, p controlplane.Principal, path, key string) error {
	resp, release, err := a.codeCallOK(r, p, http.MethodGet, path, nil, false)
	if err != nil {
		return err
	}
	defer release()
	var list []json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return fmt.Errorf("code interpreter answer: %w", err)
	}
	if list == nil {
		list = []json.RawMessage{}
	}
	writeJSON(w, http.StatusOK, map[string]any{key: list})
	return nil
}

func (a *API) deleteCodeContext(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return a.relayCode(w, r, p, http.MethodDelete, "/v1/contexts/"+url.PathEscape(r.PathValue("ctx")), nil)
}

func (a *API) restartCodeContext(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return a.relayCode(w, r, p, http.MethodPost, "/v1/contexts/"+url.PathEscape(r.PathValue("ctx"))+"/restart", nil)
}

func (a *API) interruptCodeContext(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return a.relayCode(w, r, p, http.MethodPost, "/v1/contexts/"+url.PathEscape(r.PathValue("ctx"))+"/interrupt", nil)
}

// relayCode answers with the server's own status and JSON body.
func (a *API) relayCode(w http.ResponseWriter, r *http.Request, p controlplane.Principal, method, path string, body []byte) error {
	resp, release, err := a.codeCallOK(r, p, method, path, body, true)
	if err != nil {
		return err
	}
	defer release()
	if resp.StatusCode == http.StatusNoContent {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, err = io.Copy(w, resp.Body)
	return err
}

// codeCall sends one request to the sandbox's code-interpreter server.
func (a *API) codeCall(ctx context.Context, p controlplane.Principal, id, method, path string, body []byte) (*http.Response, func(), error) {
	addr, expected, done, err := a.cp.CodeServer(ctx, p, id)
	if err != nil {
		return nil, nil, err
	}
	if expected {
		ctx = context.WithValue(ctx, dialRetryKey{}, true)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	if err != nil {
		done()
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := codeClient.Do(req)
	if err != nil {
		done()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, &apiError{status: http.StatusServiceUnavailable, code: "code_interpreter_unavailable",
			msg: fmt.Sprintf("sandbox %s has no code interpreter answering on port %d (create it from template code-interpreter): %v", id, controlplane.CodeInterpreterPort, err)}
	}
	return resp, done, nil
}

// codeCallOK is codeCall on the sandbox of r's path for the relays, which
// go on only with a success: 200, or with any2xx any 2xx status. Another
// answer becomes the server's error (codeError). On success release closes
// the answer and then ends the call, the order every relay needs.
func (a *API) codeCallOK(r *http.Request, p controlplane.Principal, method, path string, body []byte, any2xx bool) (*http.Response, func(), error) {
	resp, done, err := a.codeCall(r.Context(), p, r.PathValue("id"), method, path, body)
	if err != nil {
		return nil, nil, err
	}
	release := func() {
		resp.Body.Close()
		done()
	}
	if ok := resp.StatusCode == http.StatusOK || any2xx && resp.StatusCode < 300; !ok {
		defer release()
		return nil, nil, codeError(resp)
	}
	return resp, release, nil
}

// codeError turns the server's {code, error} answer into ours.
func codeError(resp *http.Response) error {
	var e struct {
		Code  string `json:"code"`
		Error string `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) != nil || e.Code == "" {
		return fmt.Errorf("code interpreter: %d %s", resp.StatusCode, b)
	}
	if resp.StatusCode == http.StatusRequestEntityTooLarge {
		e.Code = "payload_too_large"
	}
	return &apiError{status: resp.StatusCode, code: e.Code, msg: e.Error}
}
