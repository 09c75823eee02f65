package agent_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tb calls a toolbox route of the in-process agent and decodes a JSON
// answer into out (when non-nil).
func (e *env) tb(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(testCtx(t), method, e.ts.URL+"/toolbox"+path, rd)
	req.Header.Set("X-Access-Token", testToken)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// TestToolboxGit drives the git routes with the host's git binary in a
// temp dir (a sandbox template would need git; none ships it): clone of a
// local bare repo, status, add, commit, branches, checkout, push, pull,
// history, and the daemon's error codes.
func TestToolboxGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is required in CI")
		}
		t.Skip("git not installed")
	}
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
	for i := range n {
		go func() {
			id := "s" + string(rune('a'+i))
			if st := e.tb(t, "POST", "/process/session", map[string]any{"sessionId": id}, nil); st != 201 {
				done <- id + ": create"
				return
			}
			var res struct {
				Stdout   string
				ExitCode int
			}
			e.tb(t, "POST", "/process/session/"+id+"/exec", map[string]any{"command": "export V=" + id}, nil)
			e.tb(t, "POST", "/process/session/"+id+"/exec", map[string]any{"command": "for i in 1 2 3; do echo $V$i; done; (exit 2)"}, &res)
			if res.Stdout != id+"1\n"+id+"2\n"+id+"3\n" || res.ExitCode != 2 {
				done <- id + ": " + res.Stdout
				return
			}
			e.tb(t, "DELETE", "/process/session/"+id, nil, nil)
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
