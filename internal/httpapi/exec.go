package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
)

type execBody struct {
	Cmd       json.RawMessage   `json:"cmd"`
	Env       map[string]string `json:"env"`
	Cwd       string            `json:"cwd"`
	TimeoutMS *int64            `json:"timeout_ms"`
	Stdin     *string           `json:"stdin"`
}

// argv accepts an argv array or a shell string (run with /bin/sh -c).
func (b execBody) argv() ([]string, error) {
	var argv []string
	if err := json.Unmarshal(b.Cmd, &argv); err == nil {
		return argv, nil
	}
	var shell string
	if err := json.Unmarshal(b.Cmd, &shell); err != nil || strings.TrimSpace(shell) == "" {
		return nil, badRequest("cmd must be a non-empty array of strings or a shell string", "cmd")
	}
	return []string{"/bin/sh", "-c", shell}, nil
}

func (a *API) exec(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b execBody
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	argv, err := b.argv()
	if err != nil {
		return err
	}
	req := controlplane.ExecRequest{Argv: argv, Env: b.Env, Cwd: b.Cwd}
	if b.TimeoutMS != nil {
		if *b.TimeoutMS <= 0 {
			return badRequest("timeout_ms must be a positive integer", "timeout_ms")
		}
		req.Timeout = time.Duration(*b.TimeoutMS) * time.Millisecond
	}
	if b.Stdin != nil {
		req.Stdin = []byte(*b.Stdin)
	}
	stream, _ := strconv.ParseBool(r.URL.Query().Get("stream"))
	if stream || strings.Contains(r.Header.Get("Accept"), "application/x-ndjson") {
		return a.execStream(w, r, p, req)
	}
	var stdout, stderr bytes.Buffer
	var mu sync.Mutex
	// A command lives as long as its client listens, keyed or not.
	res, err := a.cp.Exec(clientContext(r), p, r.PathValue("id"), req,
		func(b []byte) { mu.Lock(); stdout.Write(b); mu.Unlock() },
		func(b []byte) { mu.Lock(); stderr.Write(b); mu.Unlock() })
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"exit_code": res.ExitCode, "stdout": stdout.String(), "stderr": stderr.String(),
		"timed_out": res.TimedOut, "duration_ms": res.Duration.Milliseconds(),
	})
	return nil
}

// execStream answers NDJSON events as the command runs. Errors before the
// first byte use the normal error mapper; later ones become an error event.
func (a *API) execStream(w http.ResponseWriter, r *http.Request, p controlplane.Principal, req controlplane.ExecRequest) error {
	var mu sync.Mutex
	started := false
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	emit := func(v map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		enc.Encode(v)
		if flusher != nil {
			flusher.Flush()
		}
	}
	req.OnStart = func(pid uint32) { emit(map[string]any{"type": "start", "pid": pid}) }
	res, err := a.cp.Exec(clientContext(r), p, r.PathValue("id"), req,
		func(b []byte) { emit(map[string]any{"type": "stdout", "data": string(b)}) },
		func(b []byte) { emit(map[string]any{"type": "stderr", "data": string(b)}) })
	if err != nil {
		mu.Lock()
		s := started
		mu.Unlock()
		if !s {
			return err
		}
		_, body := a.errorBody(err)
		body["type"] = "error"
		emit(body)
		return nil
	}
	emit(map[string]any{"type": "exit", "exit_code": res.ExitCode, "timed_out": res.TimedOut})
	return nil
}
