package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The toolbox is Daytona's in-sandbox API (process, sessions, PTY, files,
// git) served by pt-agent under /toolbox/, so that ptd only routes the
// Daytona SDK's toolbox calls here and every user command runs inside the
// sandbox (docs/daytona.md). The routes and bodies are the daemon's; errors
// carry its {statusCode, message, code, source} shape, which the SDK turns
// into its typed errors.

// toolboxPrefix is where the toolbox lives on pt-agent's mux.
const toolboxPrefix = "/toolbox"

// toolbox holds the toolbox's state: sessions and PTYs live in pt-agent's
// memory, so a stop that keeps memory keeps them too.
type toolbox struct {
	s        *Server
	mu       sync.Mutex
	sessions map[string]*session
	ptys     map[string]*ptySession
	code     *codeServer
}

func (s *Server) toolboxRoutes(mux *http.ServeMux) {
	tb := &toolbox{s: s, sessions: map[string]*session{}, ptys: map[string]*ptySession{}, code: newCodeServer(s.cfg.CodeInterpreter)}
	mux.HandleFunc("GET /code/ready", tb.codeReady) // ptd's, not Daytona's (toolbox_code.go)
	h := func(pattern string, fn func(w http.ResponseWriter, r *http.Request) error) {
		method, path, _ := strings.Cut(pattern, " ")
		mux.HandleFunc(method+" "+toolboxPrefix+path, func(w http.ResponseWriter, r *http.Request) {
			if err := fn(w, r); err != nil {
				writeToolboxError(w, r, err)
			}
		})
	}
	h("GET /version", func(w http.ResponseWriter, _ *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"version": "platinum"})
		return nil
	})
	h("GET /user-home-dir", tb.homeDir)
	h("GET /work-dir", tb.workDir)

	h("POST /process/execute", tb.execute)
	h("POST /process/code-run", tb.codeRun)
	h("POST /process/interpreter/context", tb.createContext)
	h("GET /process/interpreter/context", tb.listContexts)
	h("DELETE /process/interpreter/context/{id}", tb.deleteContext)
	h("GET /process/interpreter/execute", tb.interpreterExecute)
	h("POST /process/session", tb.createSession)
	h("GET /process/session", tb.listSessions)
	h("GET /process/session/{sid}", tb.getSession)
	h("DELETE /process/session/{sid}", tb.deleteSession)
	h("POST /process/session/{sid}/exec", tb.sessionExec)
	h("GET /process/session/{sid}/command/{cid}", tb.getCommand)
	h("GET /process/session/{sid}/command/{cid}/logs", tb.commandLogs)
	h("POST /process/session/{sid}/command/{cid}/input", tb.commandInput)

	h("GET /process/pty", tb.listPTY)
	h("POST /process/pty", tb.createPTY)
	h("GET /process/pty/create-connect", tb.createConnectPTY)
	h("GET /process/pty/{id}", tb.getPTY)
	h("DELETE /process/pty/{id}", tb.killPTY)
	h("POST /process/pty/{id}/resize", tb.resizePTY)
	h("GET /process/pty/{id}/connect", tb.connectPTY)

	h("GET /files", tb.listFiles)
	h("GET /files/", tb.listFiles)
	h("DELETE /files", tb.deleteFile)
	h("GET /files/info", tb.fileInfo)
	h("POST /files/folder", tb.createFolder)
	h("POST /files/move", tb.moveFile)
	h("GET /files/find", tb.findInFiles)
	h("GET /files/search", tb.searchFiles)
	h("POST /files/replace", tb.replaceInFiles)
	h("POST /files/permissions", tb.setPermissions)
	h("GET /files/download", tb.downloadFile)
	h("POST /files/bulk-upload", tb.bulkUpload)
	h("POST /files/bulk-download", tb.bulkDownload)
	h("POST /files/upload-v2", tb.uploadV2)

	h("POST /git/clone", tb.gitClone)
	h("GET /git/status", tb.gitStatus)
	h("POST /git/add", tb.gitAdd)
	h("POST /git/commit", tb.gitCommit)
	h("GET /git/branches", tb.gitBranches)
	h("POST /git/branches", tb.gitCreateBranch)
	h("DELETE /git/branches", tb.gitDeleteBranch)
	h("POST /git/checkout", tb.gitCheckout)
	h("POST /git/pull", tb.gitPull)
	h("POST /git/push", tb.gitPush)
	h("GET /git/history", tb.gitHistory)
	h("POST /git/init", tb.gitInit)
	h("GET /git/remotes", tb.gitRemotes)
	h("POST /git/remotes", tb.gitAddRemote)
	h("POST /git/reset", tb.gitReset)
	h("POST /git/restore", tb.gitRestore)
	h("GET /git/config", tb.gitGetConfig)
	h("POST /git/config", tb.gitSetConfig)
	h("POST /git/config/user", tb.gitConfigUser)
	h("POST /git/credentials", tb.gitCredentials)
}

// toolboxError is an error with the daemon's status and code.
type toolboxError struct {
	status int
	code   string
	msg    string
}

func (e *toolboxError) Error() string { return e.msg }

func tbErr(status int, code, format string, args ...any) error {
	return &toolboxError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// toolboxStatus is the one mapping of agent errors onto the daemon's
// statuses and codes.
func toolboxStatus(err error) (int, string) {
	var te *toolboxError
	switch {
	case errors.As(err, &te):
		return te.status, te.code
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errNotFound):
		return http.StatusNotFound, "FILE_NOT_FOUND"
	case errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden, "FILE_ACCESS_DENIED"
	case errors.Is(err, errInvalidPath), errors.Is(err, unix.EISDIR), errors.Is(err, unix.ENOTDIR):
		return http.StatusBadRequest, "INVALID_FILE_PATH"
	case errors.Is(err, errInvalid), errors.Is(err, errExists), errors.Is(err, fs.ErrExist),
		errors.Is(err, unix.ENOTEMPTY), errors.Is(err, errPrecondition):
		return http.StatusBadRequest, "BAD_REQUEST"
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, "UNAUTHORIZED"
	}
	return http.StatusInternalServerError, "INTERNAL_SERVER_ERROR"
}

// toolboxErrorBody is the daemon's error shape; source lets the SDK pick
// its narrow error classes (DaytonaFileNotFoundError, …).
type toolboxErrorBody struct {
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
	Code       string `json:"code"`
	Source     string `json:"source"`
	Timestamp  string `json:"timestamp"`
	Path       string `json:"path"`
	Method     string `json:"method"`
}

func newToolboxErrorBody(r *http.Request, err error) toolboxErrorBody {
	status, code := toolboxStatus(err)
	return toolboxErrorBody{StatusCode: status, Message: err.Error(), Code: code, Source: "DAYTONA_DAEMON",
		Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Path: r.URL.Path, Method: r.Method}
}

func writeToolboxError(w http.ResponseWriter, r *http.Request, err error) {
	b := newToolboxErrorBody(r, err)
	writeJSON(w, b.StatusCode, b)
}

// decodeBody reads a JSON body into v (unknown fields are tolerated: the
// SDK's clients add fields over versions).
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return tbErr(http.StatusBadRequest, "INVALID_REQUEST_BODY", "read body: %v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return tbErr(http.StatusBadRequest, "INVALID_REQUEST_BODY", "a JSON body is required")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return tbErr(http.StatusBadRequest, "INVALID_REQUEST_BODY", "invalid JSON body: %v", err)
	}
	return nil
}

func (tb *toolbox) homeDir(w http.ResponseWriter, r *http.Request) error {
	acct, err := tb.s.lookupAccount("")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"dir": acct.home})
	return nil
}

func (tb *toolbox) workDir(w http.ResponseWriter, r *http.Request) error {
	acct, err := tb.s.lookupAccount("")
	if err != nil {
		return err
	}
	dir, err := tb.s.workdir(acct, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"dir": dir})
	return nil
}

// runResult is how a collected command ended.
type runResult struct {
	stdout, stderr, combined []byte
	exitCode                 int
	timedOut                 bool
}

// run starts argv as the default user (env layered over the sandbox's,
// cwd resolved like the process service's) and collects its output until
// it ends, ctx ends, or timeout (when positive) passes; the last two kill
// its process group.
func (tb *toolbox) run(ctx context.Context, argv []string, env map[string]string, cwd string, timeout time.Duration) (runResult, error) {
	return tb.runInput(ctx, argv, env, cwd, timeout, nil)
}

// runInput is run with input written to the command's stdin, then closed
// (nil: no stdin at all). Secrets go this way rather than in argv, which
// every process in the sandbox can read.
func (tb *toolbox) runInput(ctx context.Context, argv []string, env map[string]string, cwd string, timeout time.Duration, input []byte) (runResult, error) {
	s := tb.s
	acct, err := s.lookupAccount("")
	if err != nil {
		return runResult{}, err
	}
	var cwdp *string
	if cwd != "" {
		cwdp = &cwd
	}
	dir, err := s.workdir(acct, cwdp)
	if err != nil {
		return runResult{}, err
	}
	envv := buildEnv(acct, s.sandboxEnv(), env)
	path, err := lookPath(argv[0], envv)
	if err != nil {
		return runResult{}, err
	}
	p, sub, err := s.start(spawnSpec{path: path, argv: argv, env: envv, dir: dir, acct: acct, stdin: input != nil})
	if err != nil {
		return runResult{}, err
	}
	defer p.unsubscribe(sub)
	if input != nil {
		go func() { // a child that never reads must not block the collection below
			p.inMu.Lock()
			_, _ = p.stdin.Write(input)
			p.inMu.Unlock()
			_ = p.closeStdin()
		}()
	}
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	var res runResult
	for {
		select {
		case ev := <-sub.ch:
			if d := ev.GetData(); d != nil {
				if b := d.GetStdout(); b != nil {
					res.stdout = append(res.stdout, b...)
					res.combined = append(res.combined, b...)
				}
				if b := d.GetStderr(); b != nil {
					res.stderr = append(res.stderr, b...)
					res.combined = append(res.combined, b...)
				}
			}
			if end := ev.GetEnd(); end != nil {
				res.exitCode = int(end.GetExitCode())
				return res, nil
			}
		case <-expire:
			_ = p.signal(unix.SIGKILL)
			res.timedOut = true
			expire = nil
		case <-ctx.Done():
			_ = p.signal(unix.SIGKILL)
			return res, ctx.Err()
		}
	}
}

// lookup finds id in m, one of the toolbox's session maps (tb.sessions,
// tb.ptys), under tb.mu; an absent id is a 404 with code, "<what> <id> not
// found".
func lookup[S any](tb *toolbox, m map[string]S, id, code, what string) (S, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	s, ok := m[id]
	if !ok {
		var zero S
		return zero, tbErr(http.StatusNotFound, code, "%s %s not found", what, id)
	}
	return s, nil
}

// views lists the views of every session in m (tb.sessions, tb.ptys): the
// sessions are gathered under tb.mu and viewed after it, since a view
// takes the session's own lock.
func views[S viewer](tb *toolbox, m map[string]S) []map[string]any {
	tb.mu.Lock()
	all := make([]S, 0, len(m))
	for _, s := range m {
		all = append(all, s)
	}
	tb.mu.Unlock()
	out := make([]map[string]any, 0, len(all))
	for _, s := range all {
		out = append(out, s.view())
	}
	return out
}

// writeView answers the GET of one session: find looks id up (tb.session,
// tb.pty), its view is the body.
func writeView[S viewer](w http.ResponseWriter, id string, find func(string) (S, error)) error {
	s, err := find(id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.view())
	return nil
}

// viewer is a toolbox session (a shell session, a PTY) as its GET and
// list answers show it.
type viewer interface{ view() map[string]any }
