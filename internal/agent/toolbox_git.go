package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The toolbox's git routes run the sandbox's own git binary (pt-agent
// brings none): a template without git answers 400 BAD_REQUEST saying so.
// Credentials given for clone, pull and push travel in the remote URL of
// that one command only, never in the repository's config.

// gitTimeout bounds one git command.
const gitTimeout = 10 * time.Minute

// git runs git with args in dir and returns its stdout, or an error with
// the daemon's code when git failed.
func (tb *toolbox) git(ctx context.Context, dir string, args ...string) (string, error) {
	argv := append([]string{"git"}, args...)
	res, err := tb.run(ctx, argv, gitEnv(), dir, gitTimeout)
	if err != nil {
		if strings.Contains(err.Error(), `executable "git" not found`) {
			return "", tbErr(http.StatusBadRequest, "BAD_REQUEST", "git is not installed in this sandbox's template")
		}
		return "", err
	}
	if res.timedOut {
		return "", tbErr(http.StatusRequestTimeout, "REQUEST_TIMEOUT", "git %s timed out", args[0])
	}
	if res.exitCode != 0 {
		return "", gitError(args[0], string(res.stderr)+string(res.stdout))
	}
	return string(res.stdout), nil
}

// gitEnv is the environment every git command runs with: no prompt for a
// password, which would wait for a terminal nobody types into.
func gitEnv() map[string]string { return map[string]string{"GIT_TERMINAL_PROMPT": "0"} }

// gitPost is the skeleton every git route with a JSON body but commit
// shares: decode the body into a T, let do check it and run its git
// commands, and answer status with no body, as the daemon's routes do. Each do keeps its
// route's order of checks, so a request that is wrong twice over gets the
// same error as before.
func gitPost[T any](w http.ResponseWriter, r *http.Request, status int, do func(ctx context.Context, req *T) error) error {
	var req T
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := do(r.Context(), &req); err != nil {
		return err
	}
	w.WriteHeader(status)
	return nil
}

// gitIn resolves the repository at path and runs git there, dropping its
// output: the one command of most routes with a body.
func (tb *toolbox) gitIn(ctx context.Context, path string, args ...string) error {
	dir, err := tb.repo(path)
	if err != nil {
		return err
	}
	_, err = tb.git(ctx, dir, args...)
	return err
}

// gitQuery is the start of the GET routes: git's output in the repository
// ?path names, split into lines for the route to parse.
func (tb *toolbox) gitQuery(r *http.Request, args ...string) ([]string, error) {
	dir, err := tb.repo(r.URL.Query().Get("path"))
	if err != nil {
		return nil, err
	}
	out, err := tb.git(r.Context(), dir, args...)
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(out, "\n"), "\n"), nil
}

// gitError picks the daemon's code from git's message.
func gitError(op, out string) error {
	msg := "git " + op + ": " + strings.TrimSpace(out)
	low := strings.ToLower(out)
	switch {
	case strings.Contains(low, "authentication failed"), strings.Contains(low, "could not read username"):
		return tbErr(http.StatusUnauthorized, "GIT_AUTH_FAILED", "%s", msg)
	case strings.Contains(low, "repository") && strings.Contains(low, "not found"),
		strings.Contains(low, "does not appear to be a git repository"), strings.Contains(low, "not a git repository"):
		return tbErr(http.StatusNotFound, "GIT_REPO_NOT_FOUND", "%s", msg)
	case strings.Contains(low, "already exists") && op == "branch":
		return tbErr(http.StatusConflict, "GIT_BRANCH_EXISTS", "%s", msg)
	case strings.Contains(low, "did not match any"), strings.Contains(low, "not found") && op == "branch",
		strings.Contains(low, "couldn't find remote ref"):
		return tbErr(http.StatusNotFound, "GIT_BRANCH_NOT_FOUND", "%s", msg)
	case strings.Contains(low, "rejected"):
		return tbErr(http.StatusConflict, "GIT_PUSH_REJECTED", "%s", msg)
	case strings.Contains(low, "conflict"):
		return tbErr(http.StatusConflict, "GIT_MERGE_CONFLICT", "%s", msg)
	case strings.Contains(low, "would be overwritten"), strings.Contains(low, "please commit your changes"):
		return tbErr(http.StatusConflict, "GIT_DIRTY_WORKTREE", "%s", msg)
	case strings.Contains(low, "could not resolve host"), strings.Contains(low, "unable to access"):
		return tbErr(http.StatusBadGateway, "GIT_TRANSPORT_FAILED", "%s", msg)
	}
	return tbErr(http.StatusBadRequest, "BAD_REQUEST", "%s", msg)
}

// withCredentials puts username:password into an http(s) URL.
func withCredentials(raw, user, pass string) string {
	if user == "" && pass == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return raw
	}
	u.User = url.UserPassword(user, pass)
	return u.String()
}

func (tb *toolbox) repo(p string) (string, error) {
	dir, _, err := tb.path(p)
	return dir, err
}

func (tb *toolbox) gitClone(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		URL      string `json:"url"`
		Path     string `json:"path"`
		Branch   string `json:"branch"`
		CommitID string `json:"commit_id"`
		Username string `json:"username"`
		Password string `json:"password"`
		Depth    int    `json:"depth"`
		Insecure bool   `json:"insecure_skip_tls"`
	}
	return gitPost(w, r, http.StatusOK, func(ctx context.Context, req *request) error {
		if req.URL == "" {
			return tbErr(http.StatusBadRequest, "BAD_REQUEST", "url is required")
		}
		dir, err := tb.repo(req.Path)
		if err != nil {
			return err
		}
		args := []string{"clone"}
		if req.Insecure {
			args = []string{"-c", "http.sslVerify=false", "clone"}
		}
		if req.Branch != "" {
			args = append(args, "--branch", req.Branch)
		}
		if req.Depth > 0 {
			args = append(args, "--depth", strconv.Itoa(req.Depth))
		}
		args = append(args, "--", withCredentials(req.URL, req.Username, req.Password), dir)
		if _, err := tb.git(ctx, "/", args...); err != nil {
			return err
		}
		if req.Username != "" || req.Password != "" { // keep no credentials in .git/config
			if _, err := tb.git(ctx, dir, "remote", "set-url", "origin", req.URL); err != nil {
				return err
			}
		}
		if req.CommitID != "" {
			if _, err := tb.git(ctx, dir, "checkout", req.CommitID); err != nil {
				return err
			}
		}
		return nil
	})
}

// gitStatus parses `git status --porcelain=v1 -b`.
func (tb *toolbox) gitStatus(w http.ResponseWriter, r *http.Request) error {
	lines, err := tb.gitQuery(r, "status", "--porcelain=v1", "-b", "-uall")
	if err != nil {
		return err
	}
	type fileStatus struct {
		Name     string `json:"name"`
		Staging  string `json:"staging"`
		Worktree string `json:"worktree"`
		Extra    string `json:"extra"`
	}
	st := map[string]any{"currentBranch": "", "ahead": 0, "behind": 0, "branchPublished": false, "detached": false}
	files := []fileStatus{}
	for _, line := range lines {
		if head, ok := strings.CutPrefix(line, "## "); ok {
			parseBranchLine(head, st)
			continue
		}
		if len(line) < 4 {
			continue
		}
		name, extra := line[3:], ""
		if from, to, ok := strings.Cut(name, " -> "); ok {
			name, extra = to, from
		}
		files = append(files, fileStatus{Name: name, Staging: statusName(line[0]), Worktree: statusName(line[1]), Extra: extra})
	}
	st["fileStatus"] = files
	writeJSON(w, http.StatusOK, st)
	return nil
}
func parseBranchLine(head string, st map[string]any) {
	if b, ok := strings.CutPrefix(head, "No commits yet on "); ok {
		st["currentBranch"] = b
		return
	}
	if strings.HasPrefix(head, "HEAD (no branch)") {
		st["currentBranch"], st["detached"] = "HEAD", true
		return
	}
	branch, rest, _ := strings.Cut(head, " ")
	local, upstream, published := strings.Cut(branch, "...")
	st["currentBranch"] = local
	if published {
		st["upstream"], st["branchPublished"] = upstream, true
	}
	rest = strings.Trim(rest, "[]")
	for _, part := range strings.Split(rest, ", ") {
		if n, ok := strings.CutPrefix(part, "ahead "); ok {
			st["ahead"], _ = strconv.Atoi(n)
		}
		if n, ok := strings.CutPrefix(part, "behind "); ok {
			st["behind"], _ = strconv.Atoi(n)
		}
	}
}

func statusName(c byte) string {
	switch c {
	case '?':
		return "Untracked"
	case 'M':
		return "Modified"
	case 'A':
		return "Added"
	case 'D':
		return "Deleted"
	case 'R':
		return "Renamed"
	case 'C':
		return "Copied"
	case 'U':
		return "Updated but unmerged"
	}
	return "Unmodified"
}

func (tb *toolbox) gitAdd(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Path  string   `json:"path"`
		Files []string `json:"files"`
	}
	return gitPost(w, r, http.StatusOK, func(ctx context.Context, req *request) error {
		dir, err := tb.repo(req.Path)
		if err != nil {
			return err
		}
		if len(req.Files) == 0 {
			return tbErr(http.StatusBadRequest, "BAD_REQUEST", "files must name at least one path")
		}
		_, err = tb.git(ctx, dir, append([]string{"add", "--"}, req.Files...)...)
		return err
	})
}

func (tb *toolbox) gitCommit(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path       string `json:"path"`
		Message    string `json:"message"`
		Author     string `json:"author"`
		Email      string `json:"email"`
		AllowEmpty bool   `json:"allow_empty"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Message == "" || req.Author == "" || req.Email == "" {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "message, author and email are required")
	}
	dir, err := tb.repo(req.Path)
	if err != nil {
		return err
	}
	args := []string{"-c", "user.name=" + req.Author, "-c", "user.email=" + req.Email, "commit", "-m", req.Message}
	if req.AllowEmpty {
		args = append(args, "--allow-empty")
	}
	if _, err := tb.git(r.Context(), dir, args...); err != nil {
		return err
	}
	hash, err := tb.git(r.Context(), dir, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"hash": strings.TrimSpace(hash)})
	return nil
}

func (tb *toolbox) gitBranches(w http.ResponseWriter, r *http.Request) error {
	lines, err := tb.gitQuery(r, "branch", "--format=%(HEAD) %(refname:short)")
	if err != nil {
		return err
	}
	branches, current := []string{}, ""
	for _, line := range lines {
		if len(line) < 3 {
			continue
		}
		name := line[2:]
		branches = append(branches, name)
		if line[0] == '*' {
			current = name
		}
	}
	resp := map[string]any{"branches": branches}
	if current != "" {
		resp["current"] = current
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

type gitBranchRequest struct {
	Path string `json:"path"`
	Name string `json:"name"`
}

func (tb *toolbox) gitCreateBranch(w http.ResponseWriter, r *http.Request) error {
	return gitPost(w, r, http.StatusCreated, func(ctx context.Context, req *gitBranchRequest) error {
		return tb.gitIn(ctx, req.Path, "branch", "--", req.Name)
	})
}

func (tb *toolbox) gitDeleteBranch(w http.ResponseWriter, r *http.Request) error {
	return gitPost(w, r, http.StatusNoContent, func(ctx context.Context, req *gitBranchRequest) error {
		return tb.gitIn(ctx, req.Path, "branch", "-D", "--", req.Name)
	})
}

func (tb *toolbox) gitCheckout(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Path   string `json:"path"`
		Branch string `json:"branch"`
	}
	return gitPost(w, r, http.StatusOK, func(ctx context.Context, req *request) error {
		return tb.gitIn(ctx, req.Path, "checkout", req.Branch)
	})
}

type gitRemoteRequest struct {
	Path        string `json:"path"`
	Remote      string `json:"remote"`
	Branch      string `json:"branch"`
	Username    string `json:"username"`
	Password    string `json:"password"`
	SetUpstream bool   `json:"set_upstream"`
}

// remoteArgs names the remote (credentials only in the URL of this call).
func (tb *toolbox) remoteArgs(ctx context.Context, dir string, req gitRemoteRequest) ([]string, error) {
	remote := req.Remote
	if remote == "" {
		remote = "origin"
	}
	if req.Username == "" && req.Password == "" {
		return []string{remote}, nil
	}
	u, err := tb.git(ctx, dir, "remote", "get-url", remote)
	if err != nil {
		return nil, err
	}
	return []string{withCredentials(strings.TrimSpace(u), req.Username, req.Password)}, nil
}

func (tb *toolbox) gitPull(w http.ResponseWriter, r *http.Request) error {
	return gitPost(w, r, http.StatusOK, func(ctx context.Context, req *gitRemoteRequest) error {
		dir, err := tb.repo(req.Path)
		if err != nil {
			return err
		}
		args := []string{"pull", "--no-rebase"}
		if req.Remote != "" || req.Branch != "" || req.Username != "" {
			remote, err := tb.remoteArgs(ctx, dir, *req)
			if err != nil {
				return err
			}
			args = append(args, remote...)
			if req.Branch != "" {
				args = append(args, req.Branch)
			}
		}
		_, err = tb.git(ctx, dir, args...)
		return err
	})
}

func (tb *toolbox) gitPush(w http.ResponseWriter, r *http.Request) error {
	return gitPost(w, r, http.StatusOK, func(ctx context.Context, req *gitRemoteRequest) error {
		dir, err := tb.repo(req.Path)
		if err != nil {
			return err
		}
		remote, err := tb.remoteArgs(ctx, dir, *req)
		if err != nil {
			return err
		}
		args := []string{"push"}
		if req.SetUpstream {
			args = append(args, "--set-upstream")
		}
		args = append(args, remote...)
		branch := req.Branch
		if branch == "" {
			b, err := tb.git(ctx, dir, "rev-parse", "--abbrev-ref", "HEAD")
			if err != nil {
				return err
			}
			branch = strings.TrimSpace(b)
		}
		_, err = tb.git(ctx, dir, append(args, branch)...)
		return err
	})
}

func (tb *toolbox) gitHistory(w http.ResponseWriter, r *http.Request) error {
	lines, err := tb.gitQuery(r, "log", "--format=%H%x1f%an%x1f%ae%x1f%s%x1f%aI")
	if err != nil {
		return err
	}
	commits := []map[string]string{}
	for _, line := range lines {
		f := strings.Split(line, "\x1f")
		if len(f) == 5 {
			commits = append(commits, map[string]string{"hash": f[0], "author": f[1], "email": f[2], "message": f[3], "timestamp": f[4]})
		}
	}
	writeJSON(w, http.StatusOK, commits)
	return nil
}

// The routes below are the ones the 0.218 SDK added (init, remotes, reset,
// restore, config, credentials); they answer with the statuses its daemon
// does (201 for init and remote add, 200 otherwise).

func (tb *toolbox) gitInit(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Path          string `json:"path"`
		Bare          bool   `json:"bare"`
		InitialBranch string `json:"initial_branch"`
	}
	return gitPost(w, r, http.StatusCreated, func(ctx context.Context, req *request) error {
		dir, err := tb.repo(req.Path)
		if err != nil {
			return err
		}
		args := []string{"init", "-q"}
		if req.Bare {
			args = append(args, "--bare")
		}
		if req.InitialBranch != "" {
			args = append(args, "--initial-branch="+req.InitialBranch)
		}
		_, err = tb.git(ctx, "/", append(args, "--", dir)...)
		return err
	})
}

// gitRemotes is GET /git/remotes?path: {remotes: [{name, url}]}, with any
// password in a URL left out, as the daemon does.
func (tb *toolbox) gitRemotes(w http.ResponseWriter, r *http.Request) error {
	lines, err := tb.gitQuery(r, "remote", "-v")
	if err != nil {
		return err
	}
	type remote struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	}
	remotes := []remote{}
	seen := map[string]bool{}
	for _, line := range lines {
		f := strings.Fields(line) // "origin\t<url> (fetch)"
		if len(f) < 2 || seen[f[0]] {
			continue
		}
		seen[f[0]] = true
		remotes = append(remotes, remote{Name: f[0], URL: redactURL(f[1])})
	}
	writeJSON(w, http.StatusOK, map[string]any{"remotes": remotes})
	return nil
}

// redactURL drops the password of a URL's userinfo.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); !ok {
		return raw
	}
	u.User = url.User(u.User.Username())
	return u.String()
}

func (tb *toolbox) gitAddRemote(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Path      string `json:"path"`
		Name      string `json:"name"`
		URL       string `json:"url"`
		Fetch     bool   `json:"fetch"`
		Overwrite bool   `json:"overwrite"`
	}
	return gitPost(w, r, http.StatusCreated, func(ctx context.Context, req *request) error {
		if req.Name == "" || req.URL == "" || strings.HasPrefix(req.Name, "-") {
			return tbErr(http.StatusBadRequest, "BAD_REQUEST", "name and url are required (and name must not start with '-')")
		}
		dir, err := tb.repo(req.Path)
		if err != nil {
			return err
		}
		if req.Overwrite {
			if _, err := tb.git(ctx, dir, "remote", "get-url", req.Name); err == nil {
				if _, err := tb.git(ctx, dir, "remote", "remove", req.Name); err != nil {
					return err
				}
			}
		}
		if _, err := tb.git(ctx, dir, "remote", "add", req.Name, req.URL); err != nil {
			var te *toolboxError
			if errors.As(err, &te) && strings.Contains(te.msg, "already exists") {
				return tbErr(http.StatusConflict, "CONFLICT", "%s", te.msg)
			}
			return err
		}
		if req.Fetch {
			if _, err := tb.git(ctx, dir, "fetch", "--", req.Name); err != nil {
				return err
			}
		}
		return nil
	})
}

// gitReset is POST /git/reset {path, mode?, target?, files?}: git reset
// --<mode> (soft, mixed — the default —, hard, merge, keep) to target
// (HEAD when empty), or of files only.
func (tb *toolbox) gitReset(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Path   string   `json:"path"`
		Mode   string   `json:"mode"`
		Target string   `json:"target"`
		Files  []string `json:"files"`
	}
	return gitPost(w, r, http.StatusOK, func(ctx context.Context, req *request) error {
		mode := req.Mode
		switch mode {
		case "":
			mode = "mixed"
		case "soft", "mixed", "hard", "merge", "keep":
		default:
			return tbErr(http.StatusBadRequest, "BAD_REQUEST", "unsupported reset mode %q (supported: soft, mixed, hard, merge, keep)", req.Mode)
		}
		if strings.HasPrefix(req.Target, "-") {
			return tbErr(http.StatusBadRequest, "BAD_REQUEST", "target must not start with '-'")
		}
		args := []string{"reset", "-q"}
		if len(req.Files) == 0 || mode != "mixed" {
			args = append(args, "--"+mode)
		}
		if req.Target != "" {
			args = append(args, req.Target)
		}
		if len(req.Files) > 0 {
			args = append(append(args, "--"), req.Files...)
		}
		return tb.gitIn(ctx, req.Path, args...)
	})
}

// gitRestore is POST /git/restore {path, files, staged?, worktree?,
// source?}: git restore, the worktree when neither is set (git's
// default).
func (tb *toolbox) gitRestore(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Path     string   `json:"path"`
		Files    []string `json:"files"`
		Staged   bool     `json:"staged"`
		Worktree bool     `json:"worktree"`
		Source   string   `json:"source"`
	}
	return gitPost(w, r, http.StatusOK, func(ctx context.Context, req *request) error {
		if len(req.Files) == 0 {
			return tbErr(http.StatusBadRequest, "BAD_REQUEST", "files must name at least one path")
		}
		args := []string{"restore"}
		if req.Staged {
			args = append(args, "--staged")
		}
		if req.Worktree {
			args = append(args, "--worktree")
		}
		if req.Source != "" {
			args = append(args, "--source="+req.Source)
		}
		return tb.gitIn(ctx, req.Path, append(append(args, "--"), req.Files...)...)
	})
}

// configScope turns the SDK's scope (global — the default —, local,
// system) into git config's flag and the directory to run in; local needs
// a repository path.
func (tb *toolbox) configScope(scope, path string) (flag, dir string, err error) {
	switch scope {
	case "", "global", "system":
		if scope == "" {
			scope = "global"
		}
		if path == "" {
			return "--" + scope, "/", nil
		}
	case "local":
		if path == "" {
			return "", "", tbErr(http.StatusBadRequest, "BAD_REQUEST", "path is required when scope is local")
		}
	default:
		return "", "", tbErr(http.StatusBadRequest, "BAD_REQUEST", "scope must be global, local or system")
	}
	dir, err = tb.repo(path)
	return "--" + scope, dir, err
}

var gitConfigKeyRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*(\.[^\n]+)?\.[A-Za-z][A-Za-z0-9-]*$`)

// gitGetConfig is GET /git/config?key&path&scope: {value}, null when unset.
func (tb *toolbox) gitGetConfig(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	key := q.Get("key")
	if !gitConfigKeyRE.MatchString(key) {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "key must be a git config key like user.name")
	}
	flag, dir, err := tb.configScope(q.Get("scope"), q.Get("path"))
	if err != nil {
		return err
	}
	res, err := tb.run(r.Context(), []string{"git", "config", flag, "--get", key}, gitEnv(), dir, gitTimeout)
	if err != nil {
		return err
	}
	switch res.exitCode {
	case 0:
		writeJSON(w, http.StatusOK, map[string]any{"value": strings.TrimSuffix(string(res.stdout), "\n")})
	case 1: // the key is not set
		writeJSON(w, http.StatusOK, map[string]any{"value": nil})
	default:
		return gitError("config", string(res.stderr))
	}
	return nil
}

func (tb *toolbox) gitSetConfig(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Key   string `json:"key"`
		Value string `json:"value"`
		Scope string `json:"scope"`
		Path  string `json:"path"`
	}
	return gitPost(w, r, http.StatusOK, func(ctx context.Context, req *request) error {
		if !gitConfigKeyRE.MatchString(req.Key) {
			return tbErr(http.StatusBadRequest, "BAD_REQUEST", "key must be a git config key like user.name")
		}
		flag, dir, err := tb.configScope(req.Scope, req.Path)
		if err != nil {
			return err
		}
		_, err = tb.git(ctx, dir, "config", flag, req.Key, req.Value)
		return err
	})
}

func (tb *toolbox) gitConfigUser(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Name  string `json:"name"`
		Email string `json:"email"`
		Scope string `json:"scope"`
		Path  string `json:"path"`
	}
	return gitPost(w, r, http.StatusOK, func(ctx context.Context, req *request) error {
		if req.Name == "" || req.Email == "" {
			return tbErr(http.StatusBadRequest, "BAD_REQUEST", "name and email are required")
		}
		flag, dir, err := tb.configScope(req.Scope, req.Path)
		if err != nil {
			return err
		}
		for _, kv := range [][2]string{{"user.name", req.Name}, {"user.email", req.Email}} {
			if _, err := tb.git(ctx, dir, "config", flag, kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	})
}

// gitCredentials is POST /git/credentials {username, password, host?,
// protocol?} (the SDK's dangerouslyAuthenticate): git's "store" helper
// becomes the user's global credential helper and the credential is
// approved into it (~/.git-credentials, plaintext, as the SDK's name
// warns), through stdin rather than argv. Host defaults to github.com and
// protocol to https, as the daemon's do.
func (tb *toolbox) gitCredentials(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Host     string `json:"host"`
		Protocol string `json:"protocol"`
	}
	return gitPost(w, r, http.StatusOK, func(ctx context.Context, req *request) error {
		if req.Host == "" {
			req.Host = "github.com"
		}
		if req.Protocol == "" {
			req.Protocol = "https"
		}
		for _, f := range []string{req.Username, req.Password, req.Host, req.Protocol} {
			if strings.ContainsAny(f, "\n\r\x00") {
				return tbErr(http.StatusBadRequest, "BAD_REQUEST", "credential fields must not contain newline or NUL characters")
			}
		}
		if req.Username == "" || req.Password == "" {
			return tbErr(http.StatusBadRequest, "BAD_REQUEST", "username and password are required")
		}
		if _, err := tb.git(ctx, "/", "config", "--global", "credential.helper", "store"); err != nil {
			return err
		}
		input := fmt.Sprintf("protocol=%s\nhost=%s\nusername=%s\npassword=%s\n\n", req.Protocol, req.Host, req.Username, req.Password)
		res, err := tb.runInput(ctx, []string{"git", "credential", "approve"}, gitEnv(), "/", gitTimeout, []byte(input))
		if err != nil {
			return err
		}
		if res.exitCode != 0 {
			return gitError("credential", string(res.stderr))
		}
		return nil
	})
}
