package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/testenv"
)

// tbCall calls a toolbox route of the in-process agent and decodes a JSON
// answer into out (when non-nil). It never fails the test itself, so
// goroutines may call it.
func (e *env) tbCall(ctx context.Context, method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.ts.URL+"/toolbox"+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Access-Token", testToken)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, nil
}

// tb is tbCall that fails the test on a transport or decoding error; only
// the test's own goroutine may call it.
func (e *env) tb(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	st, err := e.tbCall(testCtx(t), method, path, body, out)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestToolboxGit drives the git routes with the host's git binary in a
// temp dir (in a sandbox it is the template's git: python-node ships it),
// covering clone of a
// local bare repo, status, add, commit, branches, checkout, push, pull,
// history, and the daemon's error codes.
func TestToolboxGit(t *testing.T) {
	testenv.RequiresCommand(t, "git")
	e := newEnv(t)
	dir := t.TempDir()
	bare := filepath.Join(dir, "origin.git")
	seed := filepath.Join(dir, "seed")
	for _, args := range [][]string{
		{"init", "--bare", "-b", "main", bare},
		{"init", "-b", "main", seed},
		{"-C", seed, "-c", "user.name=s", "-c", "user.email=s@x", "commit", "--allow-empty", "-m", "root"},
		{"-C", seed, "push", bare, "main"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	repo := filepath.Join(dir, "clone")
	if st := e.tb(t, "POST", "/git/clone", map[string]any{"url": bare, "path": repo}, nil); st != 200 {
		t.Fatalf("clone: %d", st)
	}
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a"), 0o644)
	var status struct {
		CurrentBranch string
		Ahead         int
		FileStatus    []struct{ Name, Staging, Worktree string }
	}
	e.tb(t, "GET", "/git/status?path="+repo, nil, &status)
	if status.CurrentBranch != "main" || len(status.FileStatus) != 1 || status.FileStatus[0].Name != "a.txt" || status.FileStatus[0].Worktree != "Untracked" {
		t.Fatalf("status before add: %+v", status)
	}
	e.tb(t, "POST", "/git/add", map[string]any{"path": repo, "files": []string{"a.txt"}}, nil)
	e.tb(t, "GET", "/git/status?path="+repo, nil, &status)
	if status.FileStatus[0].Staging != "Added" {
		t.Fatalf("status after add: %+v", status)
	}
	var commit struct{ Hash string }
	if st := e.tb(t, "POST", "/git/commit", map[string]any{"path": repo, "message": "add a", "author": "Ann", "email": "ann@x"}, &commit); st != 200 || len(commit.Hash) != 40 {
		t.Fatalf("commit: %d %+v", st, commit)
	}
	e.tb(t, "GET", "/git/status?path="+repo, nil, &status)
	if status.Ahead != 1 || len(status.FileStatus) != 0 {
		t.Fatalf("status after commit: %+v", status)
	}
	if st := e.tb(t, "POST", "/git/push", map[string]any{"path": repo}, nil); st != 200 {
		t.Fatalf("push: %d", st)
	}
	out, _ := exec.Command("git", "-C", bare, "log", "--format=%s %an", "-1").Output()
	if strings.TrimSpace(string(out)) != "add a Ann" {
		t.Fatalf("bare repo head after push: %q", out)
	}
	e.tb(t, "POST", "/git/branches", map[string]any{"path": repo, "name": "feature"}, nil)
	var errBody struct{ Code, Source string }
	if st := e.tb(t, "POST", "/git/branches", map[string]any{"path": repo, "name": "feature"}, &errBody); st != 409 || errBody.Code != "GIT_BRANCH_EXISTS" || errBody.Source != "DAYTONA_DAEMON" {
		t.Errorf("second branch create: %d %+v", st, errBody)
	}
	e.tb(t, "POST", "/git/checkout", map[string]any{"path": repo, "branch": "feature"}, nil)
	var branches struct {
		Branches []string
		Current  string
	}
	e.tb(t, "GET", "/git/branches?path="+repo, nil, &branches)
	if strings.Join(branches.Branches, ",") != "feature,main" || branches.Current != "feature" {
		t.Errorf("branches: %+v", branches)
	}
	if st := e.tb(t, "POST", "/git/checkout", map[string]any{"path": repo, "branch": "nope"}, &errBody); st != 404 || errBody.Code != "GIT_BRANCH_NOT_FOUND" {
		t.Errorf("checkout of an unknown branch: %d %+v", st, errBody)
	}
	// A commit pushed elsewhere comes back with pull.
	other := filepath.Join(dir, "other")
	for _, args := range [][]string{
		{"clone", bare, other},
		{"-C", other, "-c", "user.name=o", "-c", "user.email=o@x", "commit", "--allow-empty", "-m", "from other"},
		{"-C", other, "push", "origin", "main"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	e.tb(t, "POST", "/git/checkout", map[string]any{"path": repo, "branch": "main"}, nil)
	if st := e.tb(t, "POST", "/git/pull", map[string]any{"path": repo}, nil); st != 200 {
		t.Fatalf("pull: %d", st)
	}
	var history []struct{ Message, Author string }
	e.tb(t, "GET", "/git/history?path="+repo, nil, &history)
	if len(history) != 3 || history[0].Message != "from other" || history[1].Author != "Ann" {
		t.Errorf("history: %+v", history)
	}
	if st := e.tb(t, "GET", "/git/status?path="+dir, nil, &errBody); st != 404 || errBody.Code != "GIT_REPO_NOT_FOUND" {
		t.Errorf("status outside a repo: %d %+v", st, errBody)
	}
}

// TestToolboxSessionConcurrent runs commands in several sessions at once
// (go test -race): each session's output stays its own and in order.
func TestToolboxSessionConcurrent(t *testing.T) {
	e := newEnv(t)
	const n = 4
	done := make(chan string, n)
	ctx := testCtx(t)
	for i := range n {
		go func() {
			// tbCall, not tb: t.Fatal must not run outside the test's
			// goroutine.
			call := func(method, path string, body, out any) int {
				st, err := e.tbCall(ctx, method, path, body, out)
				if err != nil {
					return -1
				}
				return st
			}
			id := "s" + string(rune('a'+i))
			if st := call("POST", "/process/session", map[string]any{"sessionId": id}, nil); st != 201 {
				done <- fmt.Sprintf("%s: create: %d", id, st)
				return
			}
			var res struct {
				Stdout   string
				ExitCode int
			}
			if st := call("POST", "/process/session/"+id+"/exec", map[string]any{"command": "export V=" + id}, nil); st != 200 {
				done <- fmt.Sprintf("%s: export: %d", id, st)
				return
			}
			if st := call("POST", "/process/session/"+id+"/exec", map[string]any{"command": "for i in 1 2 3; do echo $V$i; done; (exit 2)"}, &res); st != 200 ||
				res.Stdout != id+"1\n"+id+"2\n"+id+"3\n" || res.ExitCode != 2 {
				done <- fmt.Sprintf("%s: %d %q exit %d", id, st, res.Stdout, res.ExitCode)
				return
			}
			if st := call("DELETE", "/process/session/"+id, nil, nil); st != 204 {
				done <- fmt.Sprintf("%s: delete: %d", id, st)
				return
			}
			done <- ""
		}()
	}
	for range n {
		if msg := <-done; msg != "" {
			t.Error(msg)
		}
	}
	// exit ends the session's shell: that command reports its status and
	// the session refuses more.
	e.tb(t, "POST", "/process/session", map[string]any{"sessionId": "ends"}, nil)
	var res struct {
		ExitCode int
		Stdout   string
	}
	if e.tb(t, "POST", "/process/session/ends/exec", map[string]any{"command": "echo bye; exit 3"}, &res); res.ExitCode != 3 || res.Stdout != "bye\n" {
		t.Errorf("exit in a session: %+v", res)
	}
	var errBody struct{ Code string }
	if st := e.tb(t, "POST", "/process/session/ends/exec", map[string]any{"command": "true"}, &errBody); st != 410 || errBody.Code != "SESSION_ENDED" {
		t.Errorf("exec after the shell exited: %d %+v", st, errBody)
	}
	if st := e.tb(t, "POST", "/process/session/sa/exec", map[string]any{"command": "true"}, &errBody); st != 404 {
		t.Errorf("exec in a deleted session: %d %+v", st, errBody)
	}
	if st := e.tb(t, "POST", "/process/execute", map[string]any{"command": ""}, &errBody); st != 400 || errBody.Code != "BAD_REQUEST" {
		t.Errorf("empty command: %d %+v", st, errBody)
	}
}

// gitEnv is an agent whose commands see HOME (and so git's global config
// and credential store) in a temp dir, never the test user's own.
func gitEnv(t *testing.T) (*env, string) {
	t.Helper()
	testenv.RequiresCommand(t, "git")
	e := newEnv(t)
	home := t.TempDir()
	req, _ := http.NewRequestWithContext(testCtx(t), "POST", e.ts.URL+"/init",
		strings.NewReader(`{"envVars":{"HOME":"`+home+`","XDG_CONFIG_HOME":"`+home+`/.config","GIT_CONFIG_NOSYSTEM":"1"}}`))
	req.Header.Set("X-Access-Token", testToken)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("init: %d", resp.StatusCode)
	}
	return e, home
}

// TestToolboxGitAdded drives the routes the 0.218 SDK added over 0.190:
// init, remotes, reset, restore, config (local and global), config user
// and credentials, with the statuses its daemon answers.
func TestToolboxGitAdded(t *testing.T) {
	e, home := gitEnv(t)
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if st := e.tb(t, "POST", "/git/init", map[string]any{"path": repo, "initial_branch": "trunk"}, nil); st != 201 {
		t.Fatalf("init: %d", st)
	}
	var status struct{ CurrentBranch string }
	e.tb(t, "GET", "/git/status?path="+repo, nil, &status)
	if status.CurrentBranch != "trunk" {
		t.Errorf("branch after init: %q", status.CurrentBranch)
	}
	bare := filepath.Join(dir, "bare.git")
	if st := e.tb(t, "POST", "/git/init", map[string]any{"path": bare, "bare": true}, nil); st != 201 {
		t.Fatalf("bare init: %d", st)
	}
	if out, _ := exec.Command("git", "-C", bare, "rev-parse", "--is-bare-repository").Output(); strings.TrimSpace(string(out)) != "true" {
		t.Errorf("bare init made %q", out)
	}

	// Config: local and global; an unset key is null.
	if st := e.tb(t, "POST", "/git/config/user", map[string]any{"name": "Local", "email": "l@x", "scope": "local", "path": repo}, nil); st != 200 {
		t.Fatalf("config user: %d", st)
	}
	if st := e.tb(t, "POST", "/git/config/user", map[string]any{"name": "Global", "email": "g@x"}, nil); st != 200 {
		t.Fatalf("config user global: %d", st)
	}
	var cfg struct{ Value *string }
	e.tb(t, "GET", "/git/config?key=user.name&scope=local&path="+repo, nil, &cfg)
	if cfg.Value == nil || *cfg.Value != "Local" {
		t.Errorf("local user.name: %v", cfg.Value)
	}
	e.tb(t, "GET", "/git/config?key=user.email", nil, &cfg)
	if cfg.Value == nil || *cfg.Value != "g@x" {
		t.Errorf("global user.email: %v", cfg.Value)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".gitconfig")); !strings.Contains(string(b), "Global") {
		t.Errorf("global config is not in the sandbox user's HOME: %q", b)
	}
	e.tb(t, "POST", "/git/config", map[string]any{"key": "core.autocrlf", "value": "input", "scope": "local", "path": repo}, nil)
	e.tb(t, "GET", "/git/config?key=core.autocrlf&scope=local&path="+repo, nil, &cfg)
	if cfg.Value == nil || *cfg.Value != "input" {
		t.Errorf("core.autocrlf: %v", cfg.Value)
	}
	cfg.Value = new(string)
	e.tb(t, "GET", "/git/config?key=no.such&scope=global", nil, &cfg)
	if cfg.Value != nil {
		t.Errorf("unset key: %q, want null", *cfg.Value)
	}
	var errBody struct{ Code string }
	if st := e.tb(t, "GET", "/git/config?key=user.name&scope=local", nil, &errBody); st != 400 {
		t.Errorf("local scope without a path: %d", st)
	}

	// Remotes: add, list (passwords left out), a second add conflicts
	// unless it overwrites.
	if st := e.tb(t, "POST", "/git/remotes", map[string]any{"path": repo, "name": "origin", "url": "https://u:secret@example.com/r.git"}, nil); st != 201 {
		t.Fatalf("add remote: %d", st)
	}
	if st := e.tb(t, "POST", "/git/remotes", map[string]any{"path": repo, "name": "origin", "url": bare}, &errBody); st != 409 {
		t.Errorf("second add of origin: %d %+v", st, errBody)
	}
	if st := e.tb(t, "POST", "/git/remotes", map[string]any{"path": repo, "name": "origin", "url": bare, "overwrite": true}, nil); st != 201 {
		t.Errorf("overwrite origin: %d", st)
	}
	e.tb(t, "POST", "/git/remotes", map[string]any{"path": repo, "name": "mirror", "url": "https://u:secret@example.com/m.git"}, nil)
	var remotes struct{ Remotes []struct{ Name, URL string } }
	e.tb(t, "GET", "/git/remotes?path="+repo, nil, &remotes)
	got := map[string]string{}
	for _, r := range remotes.Remotes {
		got[r.Name] = r.URL
	}
	if got["origin"] != bare || got["mirror"] != "https://u@example.com/m.git" || len(got) != 2 {
		t.Errorf("remotes: %+v", remotes)
	}

	// Reset and restore.
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("one\n"), 0o644)
	e.tb(t, "POST", "/git/add", map[string]any{"path": repo, "files": []string{"a.txt"}}, nil)
	var c1 struct{ Hash string }
	e.tb(t, "POST", "/git/commit", map[string]any{"path": repo, "message": "one", "author": "A", "email": "a@x"}, &c1)
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("two\n"), 0o644)
	e.tb(t, "POST", "/git/add", map[string]any{"path": repo, "files": []string{"a.txt"}}, nil)
	e.tb(t, "POST", "/git/commit", map[string]any{"path": repo, "message": "two", "author": "A", "email": "a@x"}, nil)
	if st := e.tb(t, "POST", "/git/reset", map[string]any{"path": repo, "mode": "soft", "target": c1.Hash}, nil); st != 200 {
		t.Fatalf("soft reset: %d", st)
	}
	var st2 struct {
		FileStatus []struct{ Name, Staging, Worktree string }
	}
	e.tb(t, "GET", "/git/status?path="+repo, nil, &st2)
	if len(st2.FileStatus) != 1 || st2.FileStatus[0].Staging != "Modified" {
		t.Errorf("after a soft reset: %+v", st2)
	}
	if st := e.tb(t, "POST", "/git/restore", map[string]any{"path": repo, "files": []string{"a.txt"}, "staged": true}, nil); st != 200 {
		t.Fatalf("restore --staged: %d", st)
	}
	e.tb(t, "GET", "/git/status?path="+repo, nil, &st2)
	if len(st2.FileStatus) != 1 || st2.FileStatus[0].Staging != "Unmodified" || st2.FileStatus[0].Worktree != "Modified" {
		t.Errorf("after restore --staged: %+v", st2)
	}
	if st := e.tb(t, "POST", "/git/restore", map[string]any{"path": repo, "files": []string{"a.txt"}}, nil); st != 200 {
		t.Fatalf("restore: %d", st)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "a.txt")); string(b) != "one\n" {
		t.Errorf("a.txt after restore: %q", b)
	}
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("dirty\n"), 0o644)
	if st := e.tb(t, "POST", "/git/reset", map[string]any{"path": repo, "mode": "hard"}, nil); st != 200 {
		t.Fatalf("hard reset: %d", st)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "a.txt")); string(b) != "one\n" {
		t.Errorf("a.txt after a hard reset: %q", b)
	}
	if st := e.tb(t, "POST", "/git/reset", map[string]any{"path": repo, "mode": "sideways"}, &errBody); st != 400 {
		t.Errorf("unknown reset mode: %d", st)
	}

	// Credentials: the store helper, the secret only in its file.
	if st := e.tb(t, "POST", "/git/credentials", map[string]any{"username": "bot", "password": "s3cr3t", "host": "git.example.com"}, nil); st != 200 {
		t.Fatalf("credentials: %d", st)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".git-credentials")); strings.TrimSpace(string(b)) != "https://bot:s3cr3t@git.example.com" {
		t.Errorf(".git-credentials: %q", b)
	}
	e.tb(t, "GET", "/git/config?key=credential.helper", nil, &cfg)
	if cfg.Value == nil || *cfg.Value != "store" {
		t.Errorf("credential.helper: %v", cfg.Value)
	}
	if st := e.tb(t, "POST", "/git/credentials", map[string]any{"username": "bot", "password": "x\nhost=evil"}, &errBody); st != 400 {
		t.Errorf("a newline in a credential: %d", st)
	}
}

// TestToolboxUploadV2: POST /files/upload-v2?path= takes a multipart
// "file" field or the raw body, makes parents and replaces the file.
func TestToolboxUploadV2(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	dest := filepath.Join(dir, "new", "sub", "f.bin")
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("other", "ignored")
	fw, _ := mw.CreateFormFile("file", "f.bin")
	fw.Write([]byte("multipart bytes"))
	mw.Close()
	post := func(ct string, rd io.Reader) (int, map[string]string) {
		req, _ := http.NewRequestWithContext(testCtx(t), "POST", e.ts.URL+"/toolbox/files/upload-v2?path="+url.QueryEscape(dest), rd)
		req.Header.Set("X-Access-Token", testToken)
		req.Header.Set("Content-Type", ct)
		resp, err := e.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]string
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if st, out := post(mw.FormDataContentType(), &body); st != 200 || out["path"] != dest || out["name"] != "f.bin" {
		t.Fatalf("multipart upload: %d %v", st, out)
	}
	if b, _ := os.ReadFile(dest); string(b) != "multipart bytes" {
		t.Errorf("after the multipart upload: %q", b)
	}
	if st, out := post("application/octet-stream", strings.NewReader("raw bytes")); st != 200 {
		t.Fatalf("raw upload: %d %v", st, out)
	}
	if b, _ := os.ReadFile(dest); string(b) != "raw bytes" {
		t.Errorf("after the raw upload: %q", b)
	}
	var noFile bytes.Buffer
	mw = multipart.NewWriter(&noFile)
	mw.WriteField("x", "y")
	mw.Close()
	if st, out := post(mw.FormDataContentType(), &noFile); st != 400 || out["code"] != "INVALID_REQUEST_BODY" {
		t.Errorf("multipart without file: %d %v", st, out)
	}
	// Without the token (and unsigned) it is refused before any write.
	req, _ := http.NewRequestWithContext(testCtx(t), "POST", e.ts.URL+"/toolbox/files/upload-v2?path="+url.QueryEscape(dir+"/x"), strings.NewReader("x"))
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := os.Stat(dir + "/x"); resp.StatusCode != 401 || err == nil {
		t.Errorf("unauthenticated upload: %d (file exists: %v)", resp.StatusCode, err == nil)
	}
}
