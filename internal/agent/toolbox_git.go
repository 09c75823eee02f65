package agent

import (
	"context"
	"net/http"
	"net/url"
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
	env := map[string]string{"GIT_TERMINAL_PROMPT": "0"}
	res, err := tb.run(ctx, argv, env, dir, gitTimeout)
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
	var req struct {
		URL      string `json:"url"`
		Path     string `json:"path"`
		Branch   string `json:"branch"`
		CommitID string `json:"commit_id"`
		Username string `json:"username"`
		Password string `json:"password"`
		Depth    int    `json:"depth"`
		Insecure bool   `json:"insecure_skip_tls"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
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
	if _, err := tb.git(r.Context(), "/", args...); err != nil {
		return err
	}
	if req.Username != "" || req.Password != "" { // keep no credentials in .git/config
		if _, err := tb.git(r.Context(), dir, "remote", "set-url", "origin", req.URL); err != nil {
			return err
		}
	}
	if req.CommitID != "" {
		if _, err := tb.git(r.Context(), dir, "checkout", req.CommitID); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// gitStatus parses `git status --porcelain=v1 -b`.
func (tb *toolbox) gitStatus(w http.ResponseWriter, r *http.Request) error {
	dir, err := tb.repo(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	out, err := tb.git(r.Context(), dir, "status", "--porcelain=v1", "-b", "-uall")
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
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
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
	var req struct {
		Path  string   `json:"path"`
		Files []string `json:"files"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	dir, err := tb.repo(req.Path)
	if err != nil {
		return err
	}
	if len(req.Files) == 0 {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "files must name at least one path")
	}
	if _, err := tb.git(r.Context(), dir, append([]string{"add", "--"}, req.Files...)...); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
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
	dir, err := tb.repo(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	out, err := tb.git(r.Context(), dir, "branch", "--format=%(HEAD) %(refname:short)")
	if err != nil {
		return err
	}
	branches, current := []string{}, ""
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
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
	var req gitBranchRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	dir, err := tb.repo(req.Path)
	if err != nil {
		return err
	}
	if _, err := tb.git(r.Context(), dir, "branch", "--", req.Name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}

func (tb *toolbox) gitDeleteBranch(w http.ResponseWriter, r *http.Request) error {
	var req gitBranchRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	dir, err := tb.repo(req.Path)
	if err != nil {
		return err
	}
	if _, err := tb.git(r.Context(), dir, "branch", "-D", "--", req.Name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (tb *toolbox) gitCheckout(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path   string `json:"path"`
		Branch string `json:"branch"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	dir, err := tb.repo(req.Path)
	if err != nil {
		return err
	}
	if _, err := tb.git(r.Context(), dir, "checkout", req.Branch); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
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
	var req gitRemoteRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	dir, err := tb.repo(req.Path)
	if err != nil {
		return err
	}
	args := []string{"pull", "--no-rebase"}
	if req.Remote != "" || req.Branch != "" || req.Username != "" {
		remote, err := tb.remoteArgs(r.Context(), dir, req)
		if err != nil {
			return err
		}
		args = append(args, remote...)
		if req.Branch != "" {
			args = append(args, req.Branch)
		}
	}
	if _, err := tb.git(r.Context(), dir, args...); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (tb *toolbox) gitPush(w http.ResponseWriter, r *http.Request) error {
	var req gitRemoteRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	dir, err := tb.repo(req.Path)
	if err != nil {
		return err
	}
	remote, err := tb.remoteArgs(r.Context(), dir, req)
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
		b, err := tb.git(r.Context(), dir, "rev-parse", "--abbrev-ref", "HEAD")
		if err != nil {
			return err
		}
		branch = strings.TrimSpace(b)
	}
	args = append(args, branch)
	if _, err := tb.git(r.Context(), dir, args...); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (tb *toolbox) gitHistory(w http.ResponseWriter, r *http.Request) error {
	dir, err := tb.repo(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	out, err := tb.git(r.Context(), dir, "log", "--format=%H%x1f%an%x1f%ae%x1f%s%x1f%aI")
	if err != nil {
		return err
	}
	commits := []map[string]string{}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		f := strings.Split(line, "\x1f")
		if len(f) == 5 {
			commits = append(commits, map[string]string{"hash": f[0], "author": f[1], "email": f[2], "message": f[3], "timestamp": f[4]})
		}
	}
	writeJSON(w, http.StatusOK, commits)
	return nil
}
