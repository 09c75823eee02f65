package platinum

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"
)

// RunCodeRequest is one cell for a sandbox of the code-interpreter
// template. Without ContextID the Language's default context runs it.
type RunCodeRequest struct {
	Code string
	// Language is "python" (the default), "javascript", "typescript" or
	// "bash".
	Language string
	// ContextID names a context from CreateCodeContext.
	ContextID string
	// Env and Cwd apply to this cell only.
	Env map[string]string
	Cwd string
	// Timeout interrupts the cell after this long; the context survives.
	Timeout time.Duration
	// OnStdout, OnStderr, OnResult and OnError, when set, see each event
	// as it arrives (before RunCode returns), as the TypeScript and Python
	// SDKs' onStdout/onStderr/onResult/onError do. OnError sees the cell's
	// own error (also in Execution.Error), never a failure to reach the
	// sandbox, which RunCode returns.
	OnStdout, OnStderr func(text string)
	OnResult           func(CodeResult)
	OnError            func(*CodeError)
	// OnStart, when set, gets the execution's ID as soon as the server has
	// accepted the cell, before its first event: StopCodeExecution(ID)
	// from elsewhere stops it.
	OnStart func(executionID string)
}

// CodeResult is one rich result: a MIME bundle (image types base64) and
// whether it is the cell's last expression (versus display() output).
type CodeResult struct {
	Data         map[string]any
	IsMainResult bool
}

// Text returns the result's text/plain form ("" when it has none).
func (r CodeResult) Text() string { s, _ := r.Data["text/plain"].(string); return s }

// HTML returns the result's text/html form ("" when it has none).
func (r CodeResult) HTML() string { s, _ := r.Data["text/html"].(string); return s }

// PNG returns the decoded image/png form (nil when it has none).
func (r CodeResult) PNG() []byte { return r.Binary("image/png") }

// SVG returns the result's image/svg+xml form ("" when it has none).
func (r CodeResult) SVG() string { s, _ := r.Data["image/svg+xml"].(string); return s }

// Markdown returns the result's text/markdown form ("" when it has none).
func (r CodeResult) Markdown() string { s, _ := r.Data["text/markdown"].(string); return s }

// JSON returns the result's application/json form (nil when it has none):
// the decoded value, e.g. a map[string]any.
func (r CodeResult) JSON() any { return r.Data["application/json"] }

// Binary returns the decoded form of a base64 MIME type (image/png,
// image/jpeg, application/pdf); nil when the result has none.
func (r CodeResult) Binary(mime string) []byte {
	s, ok := r.Data[mime].(string)
	if !ok {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// CodeError is the error a cell raised: Name "TimeoutError" for one
// interrupted at its timeout, "Interrupted" for one stopped by
// InterruptCodeContext or StopCodeExecution, "KernelDied" for one that
// killed its kernel.
type CodeError struct {
	Name, Value, Traceback string
}

func (e *CodeError) Error() string { return e.Name + ": " + e.Value }

// Execution is how a cell ended. A cell's own error is in Error, not
// RunCode's error.
type Execution struct {
	// ID is the execution's ID (exec_…).
	ID             string
	Results        []CodeResult
	Stdout, Stderr string
	Error          *CodeError
	ContextID      string
	ExecutionCount int
	// Status is "ok", "error", "timeout", "interrupted" or
	// "disconnected".
	Status string
	// Duration is the server's time from the cell's arrival to its end
	// (waiting for its context included).
	Duration time.Duration
	// KernelRestarted is the reason, when the cell ran in a fresh kernel
	// because the context's last one died or was replaced (a cell that
	// ignored SIGINT past the grace period).
	KernelRestarted string
}

// Text returns the main result's text/plain form.
func (e *Execution) Text() string {
	for _, r := range e.Results {
		if r.IsMainResult {
			return r.Text()
		}
	}
	return ""
}

// ErrCodeStreamEnded is returned (wrapped) by RunCode when the stream
// closed before the cell's end event.
var ErrCodeStreamEnded = errors.New("code stream ended without an end event")

type runCodeBody struct {
	Code      string            `json:"code"`
	Language  string            `json:"language,omitempty"`
	ContextID string            `json:"context_id,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	TimeoutMS int64             `json:"timeout_ms,omitempty"`
}

type codeEvent struct {
	Type           string         `json:"type"`
	Text           string         `json:"text"`
	Data           map[string]any `json:"data"`
	IsMainResult   bool           `json:"is_main_result"`
	Name           string         `json:"name"`
	Value          string         `json:"value"`
	Traceback      string         `json:"traceback"`
	Reason         string         `json:"reason"`
	ExecutionID    string         `json:"execution_id"`
	ContextID      string         `json:"context_id"`
	ExecutionCount *int           `json:"execution_count"`
	Status         string         `json:"status"`
	DurationMS     float64        `json:"duration_ms"`
}

// RunCode runs a cell in the sandbox's code interpreter, streaming its
// events to the request's callbacks, and returns the whole execution.
// Cancelling ctx interrupts the cell.
func (s *SandboxesService) RunCode(ctx context.Context, id string, req RunCodeRequest) (*Execution, error) {
	ex, err := s.runCode(ctx, id, req)
	if err != nil {
		return nil, fmt.Errorf("run code in sandbox %s: %w", id, err)
	}
	return ex, nil
}

func (s *SandboxesService) runCode(ctx context.Context, id string, req RunCodeRequest) (*Execution, error) {
	if req.Timeout < 0 {
		return nil, errors.New("negative Timeout")
	}
	b := runCodeBody{Code: req.Code, Language: req.Language, ContextID: req.ContextID, Env: req.Env, Cwd: req.Cwd}
	if req.Timeout > 0 {
		b.TimeoutMS = max(int64((req.Timeout+time.Millisecond-1)/time.Millisecond), 1)
	}
	resp, err := s.c.openJSON(ctx, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/code", nil, "", b, "application/x-ndjson", true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ex := &Execution{ID: resp.Header.Get("X-Execution-Id")}
	if req.OnStart != nil && ex.ID != "" {
		req.OnStart(ex.ID)
	}
	var stdout, stderr bytes.Buffer
	dec := json.NewDecoder(resp.Body)
	for {
		var ev codeEvent
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return nil, ErrCodeStreamEnded
			}
			return nil, fmt.Errorf("%w: %w", ErrCodeStreamEnded, err)
		}
		switch ev.Type {
		case "stdout":
			stdout.WriteString(ev.Text)
			if req.OnStdout != nil {
				req.OnStdout(ev.Text)
			}
		case "stderr":
			stderr.WriteString(ev.Text)
			if req.OnStderr != nil {
				req.OnStderr(ev.Text)
			}
		case "result":
			r := CodeResult{Data: ev.Data, IsMainResult: ev.IsMainResult}
			ex.Results = append(ex.Results, r)
			if req.OnResult != nil {
				req.OnResult(r)
			}
		case "error":
			ex.Error = &CodeError{Name: ev.Name, Value: ev.Value, Traceback: ev.Traceback}
			if req.OnError != nil {
				req.OnError(ex.Error)
			}
		case "kernel_restarted":
			ex.KernelRestarted = ev.Reason
		case "end":
			ex.Stdout, ex.Stderr = stdout.String(), stderr.String()
			ex.ContextID, ex.Status = ev.ContextID, ev.Status
			if ev.ExecutionID != "" {
				ex.ID = ev.ExecutionID
			}
			if ev.ExecutionCount != nil {
				ex.ExecutionCount = *ev.ExecutionCount
			}
			ex.Duration = time.Duration(ev.DurationMS * float64(time.Millisecond))
			return ex, nil
		}
	}
}

// CodeContext is a context of a sandbox's code interpreter: one kernel
// (or REPL) whose state persists across cells.
type CodeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
	Default  bool   `json:"default"`
}

// CreateCodeContext starts a new context ("" language is python; "" cwd
// is /root).
func (s *SandboxesService) CreateCodeContext(ctx context.Context, id, language, cwd string) (*CodeContext, error) {
	body := map[string]string{}
	if language != "" {
		body["language"] = language
	}
	if cwd != "" {
		body["cwd"] = cwd
	}
	return fetchJSON[CodeContext](ctx, s.c, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/code/contexts", nil, body, "create code context in sandbox %s", id)
}

// ListCodeContexts lists the sandbox's contexts (default ones once used).
func (s *SandboxesService) ListCodeContexts(ctx context.Context, id string) ([]CodeContext, error) {
	return fetchField[[]CodeContext](ctx, s.c, "GET", "/v1/sandboxes/"+url.PathEscape(id)+"/code/contexts", nil, nil, "contexts", "list code contexts of sandbox %s", id)
}

// RestartCodeContext replaces the context's kernel; its state is dropped.
func (s *SandboxesService) RestartCodeContext(ctx context.Context, id, contextID string) error {
	return callJSON(ctx, s.c, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/code/contexts/"+url.PathEscape(contextID)+"/restart", nil, nil, "restart code context %s", contextID)
}

// InterruptCodeContext interrupts the context's running cell (its state
// is kept) and reports whether one was running.
func (s *SandboxesService) InterruptCodeContext(ctx context.Context, id, contextID string) (bool, error) {
	return fetchField[bool](ctx, s.c, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/code/contexts/"+url.PathEscape(contextID)+"/interrupt", nil, nil, "interrupted", "interrupt code context %s", contextID)
}

// CodeExecutionInfo is a cell that has not ended: running, or waiting
// behind another in its context.
type CodeExecutionInfo struct {
	ID        string `json:"id"`
	ContextID string `json:"context_id"`
	Language  string `json:"language"`
	// State is "running", or "waiting" behind another cell.
	State     string    `json:"state"`
	StartedAt time.Time `json:"started_at"`
}

// ListCodeExecutions lists the sandbox's cells that have not ended.
func (s *SandboxesService) ListCodeExecutions(ctx context.Context, id string) ([]CodeExecutionInfo, error) {
	return fetchField[[]CodeExecutionInfo](ctx, s.c, "GET", "/v1/sandboxes/"+url.PathEscape(id)+"/code/executions", nil, nil, "executions", "list code executions of sandbox %s", id)
}

// StopCodeExecution stops a running cell (SIGINT, then its process is
// replaced if it ignores that) and returns once it has ended; its context
// keeps its state unless the process had to be replaced. An execution
// that has ended is an *APIError with status 404.
func (s *SandboxesService) StopCodeExecution(ctx context.Context, id, executionID string) error {
	return callJSON(ctx, s.c, "DELETE", "/v1/sandboxes/"+url.PathEscape(id)+"/code/executions/"+url.PathEscape(executionID), nil, nil, "stop code execution %s", executionID)
}

// DeleteCodeContext stops the context's kernel and forgets it.
func (s *SandboxesService) DeleteCodeContext(ctx context.Context, id, contextID string) error {
	return callJSON(ctx, s.c, "DELETE", "/v1/sandboxes/"+url.PathEscape(id)+"/code/contexts/"+url.PathEscape(contextID), nil, nil, "delete code context %s", contextID)
}

// RunCode runs a cell in the sandbox's code interpreter.
func (h *SandboxHandle) RunCode(ctx context.Context, req RunCodeRequest) (*Execution, error) {
	return h.s.RunCode(ctx, h.id, req)
}
