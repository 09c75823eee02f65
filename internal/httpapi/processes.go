package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
)

// processBody is ProcessStartRequest.
type processBody struct {
	Cmd       json.RawMessage   `json:"cmd"`
	Env       map[string]string `json:"env"`
	Cwd       string            `json:"cwd"`
	Tag       string            `json:"tag"`
	Stdin     bool              `json:"stdin"`
	PTY       *ptyBody          `json:"pty"`
	TimeoutMS *int64            `json:"timeout_ms"`
}

// ptyBody is PtySize; negative sizes decode so they get the size's own
// message rather than a type error.
type ptyBody struct {
	Cols *int64 `json:"cols"`
	Rows *int64 `json:"rows"`
}

// size converts the body, prefixing field names with prefix.
func (b ptyBody) size(prefix string) (controlplane.PTYSize, error) {
	var out controlplane.PTYSize
	for _, side := range []struct {
		name string
		v    *int64
		dst  *uint32
	}{{"cols", b.Cols, &out.Cols}, {"rows", b.Rows, &out.Rows}} {
		if side.v == nil {
			return out, badRequest(prefix+side.name+" is required", prefix+side.name)
		}
		if *side.v < 1 || *side.v > controlplane.MaxPTYSide {
			return out, badRequest(prefix+side.name+" must be between 1 and "+strconv.Itoa(controlplane.MaxPTYSide), prefix+side.name)
		}
		*side.dst = uint32(*side.v)
	}
	return out, nil
}

// processJSON is the Process schema.
func processJSON(pi controlplane.ProcessInfo) map[string]any {
	argv := pi.Argv
	if argv == nil {
		argv = []string{}
	}
	return map[string]any{"pid": pi.Pid, "tag": pi.Tag, "cmd": argv, "cwd": pi.Cwd, "pty": pi.PTY, "stdin": pi.Stdin || pi.PTY}
}

func (a *API) startProcess(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b processBody
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	argv, err := execBody{Cmd: b.Cmd}.argv()
	if err != nil {
		return err
	}
	req := controlplane.ProcessRequest{Argv: argv, Env: b.Env, Cwd: b.Cwd, Tag: b.Tag, Stdin: b.Stdin}
	if b.TimeoutMS != nil {
		if *b.TimeoutMS <= 0 {
			return badRequest("timeout_ms must be a positive integer", "timeout_ms")
		}
		req.Timeout = time.Duration(*b.TimeoutMS) * time.Millisecond
	}
	if b.PTY != nil {
		size, err := b.PTY.size("pty.")
		if err != nil {
			return err
		}
		req.PTY = &size
	}
	stream, _ := strconv.ParseBool(r.URL.Query().Get("stream"))
	stream = stream || strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
	// The stream ends with the client; the process does not.
	st, err := a.cp.StartProcess(clientContext(r), p, r.PathValue("id"), req)
	if err != nil {
		return err
	}
	defer st.Close()
	if !stream {
		var tag *string
		if b.Tag != "" {
			tag = &b.Tag
		}
		writeJSON(w, http.StatusCreated, processJSON(controlplane.ProcessInfo{
			Pid: st.Pid, Tag: tag, Argv: argv, Cwd: st.Cwd, PTY: req.PTY != nil, Stdin: req.Stdin,
		}))
		return nil
	}
	a.streamProcess(w, st)
	return nil
}

func (a *API) connectProcess(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	pid, err := pathPID(r)
	if err != nil {
		return err
	}
	st, err := a.cp.ConnectProcess(clientContext(r), p, r.PathValue("id"), pid)
	if err != nil {
		return err
	}
	defer st.Close()
	a.streamProcess(w, st)
	return nil
}

// streamProcess answers the stream's events as NDJSON ExecEvents, start
// first and exit last; a stream that breaks after the first byte ends
// with an error event. It returns when the process ends or the client
// goes away (which leaves the process running).
func (a *API) streamProcess(w http.ResponseWriter, st *controlplane.ProcessStream) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	emit := func(v map[string]any) bool {
		if err := enc.Encode(v); err != nil {
			return false // the client went away
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if !emit(map[string]any{"type": "start", "pid": st.Pid}) {
		return
	}
	for {
		ev, err := st.Next()
		if err != nil {
			_, body := a.errorBody(err)
			body["type"] = "error"
			emit(body)
			return
		}
		var ok bool
		switch {
		case ev.End != nil:
			emit(map[string]any{"type": "exit", "exit_code": ev.End.Code, "timed_out": ev.End.TimedOut})
			return
		case ev.PTY != nil:
			ok = emit(map[string]any{"type": "pty", "data_b64": base64.StdEncoding.EncodeToString(ev.PTY)})
		case ev.Stderr != nil:
			ok = emit(map[string]any{"type": "stderr", "data": string(ev.Stderr)})
		default:
			ok = emit(map[string]any{"type": "stdout", "data": string(ev.Stdout)})
		}
		if !ok {
			return
		}
	}
}

func (a *API) listProcesses(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respondRows(w, "processes", processJSON)(a.cp.Processes(r.Context(), p, r.PathValue("id")))
}

func (a *API) processInput(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	pid, err := pathPID(r)
	if err != nil {
		return err
	}
	var b struct {
		Data    *string `json:"data"`
		DataB64 *string `json:"data_b64"`
		EOF     bool    `json:"eof"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	var data []byte
	switch {
	case b.Data != nil && b.DataB64 != nil:
		return badRequest("send data or data_b64, not both", "data_b64")
	case b.Data != nil:
		data = []byte(*b.Data)
	case b.DataB64 != nil:
		if data, err = base64.StdEncoding.DecodeString(*b.DataB64); err != nil {
			return badRequest("data_b64 must be standard base64: "+err.Error(), "data_b64")
		}
	case !b.EOF:
		return badRequest("send data, data_b64 or eof", "data")
	}
	return noContent(w, a.cp.ProcessInput(r.Context(), p, r.PathValue("id"), pid, data, b.EOF))
}

func (a *API) signalProcess(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	pid, err := pathPID(r)
	if err != nil {
		return err
	}
	var b struct {
		Signal string `json:"signal"`
	}
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	return noContent(w, a.cp.SignalProcess(r.Context(), p, r.PathValue("id"), pid, b.Signal))
}

func (a *API) resizeProcess(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	pid, err := pathPID(r)
	if err != nil {
		return err
	}
	var b ptyBody
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	size, err := b.size("")
	if err != nil {
		return err
	}
	return noContent(w, a.cp.ResizeProcess(r.Context(), p, r.PathValue("id"), pid, size))
}

func (a *API) killProcess(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	pid, err := pathPID(r)
	if err != nil {
		return err
	}
	return noContent(w, a.cp.SignalProcess(r.Context(), p, r.PathValue("id"), pid, "SIGKILL"))
}

// pathPID parses {pid}: a positive 32-bit integer.
func pathPID(r *http.Request) (uint32, error) {
	n, err := strconv.ParseUint(r.PathValue("pid"), 10, 32)
	if err != nil || n == 0 {
		return 0, badRequest("pid must be a positive integer", "pid")
	}
	return uint32(n), nil
}
