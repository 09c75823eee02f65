package codeinterp

import (
	"bytes"
	"context"
	"errors"
	"image"
	_ "image/png" // image.Decode of the saved plot
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestGoSDKRunCode drives the Go SDK's RunCode and code contexts against
// the real ptd: state, streamed stdout, a PNG result, the cell's own error
// (OnError), stderr and display() results as they come (OnStderr,
// OnResult), per-call Env and Cwd, Timeout, StopCodeExecution with the ID
// from OnStart, RestartCodeContext, a context of its own, and an API error
// for a refused call.
func TestGoSDKRunCode(t *testing.T) {
	c := newClient(t)
	id := c.create("")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := platinum.New(env.url, env.token)
	h, err := cl.Sandboxes.Connect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.RunCode(ctx, platinum.RunCodeRequest{Code: "x = 41"}); err != nil {
		t.Fatal(err)
	}
	var streamed []string
	ex, err := h.RunCode(ctx, platinum.RunCodeRequest{Code: "print('a', flush=True)\nx + 1",
		OnStdout: func(s string) { streamed = append(streamed, s) }})
	if err != nil || ex.Text() != "42" || ex.Stdout != "a\n" || strings.Join(streamed, "") != "a\n" || ex.Status != "ok" ||
		ex.ContextID != "ctx_default_python" || ex.ExecutionCount < 2 {
		t.Fatalf("x + 1: %+v %v", ex, err)
	}
	ex, err = h.RunCode(ctx, platinum.RunCodeRequest{Code: "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"})
	if err != nil || len(ex.Results) == 0 || !bytes.HasPrefix(ex.Results[0].PNG(), []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("plot: %+v %v", ex, err)
	}
	var cbErr *platinum.CodeError
	ex, err = h.RunCode(ctx, platinum.RunCodeRequest{Code: "1/0", OnError: func(e *platinum.CodeError) { cbErr = e }})
	if err != nil || ex.Error == nil || ex.Error.Name != "ZeroDivisionError" || ex.Status != "error" || cbErr == nil || cbErr.Name != "ZeroDivisionError" {
		t.Fatalf("1/0: %+v %v (OnError %+v)", ex, err, cbErr)
	}
	// OnStderr and OnResult see display() output and warnings as they come;
	// Env and Cwd last one call.
	var stderrs []string
	var results []platinum.CodeResult
	ex, err = h.RunCode(ctx, platinum.RunCodeRequest{
		Code: "import os, sys\nfrom IPython.display import display, SVG\nprint('careful', file=sys.stderr, flush=True)\n" +
			"display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"/>'))\n(os.environ['SDK_VAR'], os.getcwd())",
		Env: map[string]string{"SDK_VAR": "v"}, Cwd: "/tmp",
		OnStderr: func(s string) { stderrs = append(stderrs, s) },
		OnResult: func(r platinum.CodeResult) { results = append(results, r) },
	})
	if err != nil || strings.Join(stderrs, "") != "careful\n" || ex.Stderr != "careful\n" || len(results) != 2 ||
		!strings.Contains(results[0].SVG(), "<svg") || results[0].IsMainResult || results[1].Text() != "('v', '/tmp')" {
		t.Fatalf("stderr, display, env, cwd: %+v %v (stderr %q, results %+v)", ex, err, stderrs, results)
	}
	if ex, err := h.RunCode(ctx, platinum.RunCodeRequest{Code: "(os.environ.get('SDK_VAR'), os.getcwd())"}); err != nil || ex.Text() == "('v', '/tmp')" {
		t.Fatalf("env and cwd outlived their call: %+v %v", ex, err)
	}
	// Timeout interrupts; the context keeps x.
	ex, err = h.RunCode(ctx, platinum.RunCodeRequest{Code: "while True:\n    pass", Timeout: 2 * time.Second})
	if err != nil || ex.Status != "timeout" || ex.Error == nil || ex.Error.Name != "TimeoutError" {
		t.Fatalf("timeout: %+v %v", ex, err)
	}
	// StopCodeExecution from elsewhere, with the ID OnStart handed over.
	started := make(chan string, 1)
	stopped := make(chan error, 1)
	go func() {
		eid := <-started
		stopped <- cl.Sandboxes.StopCodeExecution(ctx, id, eid)
	}()
	ex, err = h.RunCode(ctx, platinum.RunCodeRequest{Code: "import time\nprint('go', flush=True)\ntime.sleep(60)",
		OnStart: func(eid string) { started <- eid }})
	if err != nil || ex.Status != "interrupted" || ex.Error == nil || ex.Error.Name != "Interrupted" || !strings.HasPrefix(ex.ID, "exec_") {
		t.Fatalf("stopped: %+v %v", ex, err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("StopCodeExecution: %v", err)
	}
	if ex, err := h.RunCode(ctx, platinum.RunCodeRequest{Code: "x"}); err != nil || ex.Text() != "41" {
		t.Fatalf("after the timeout and the stop: %+v %v", ex, err)
	}
	if list, err := cl.Sandboxes.ListCodeExecutions(ctx, id); err != nil || len(list) != 0 {
		t.Fatalf("executions: %+v %v", list, err)
	}
	if err := cl.Sandboxes.RestartCodeContext(ctx, id, "ctx_default_python"); err != nil {
		t.Fatal(err)
	}
	if ex, err := h.RunCode(ctx, platinum.RunCodeRequest{Code: "'x' in globals()"}); err != nil || ex.Text() != "False" {
		t.Fatalf("after the restart: %+v %v", ex, err)
	}
	cc, err := cl.Sandboxes.CreateCodeContext(ctx, id, "javascript", "")
	if err != nil || cc.Language != "javascript" {
		t.Fatalf("context: %+v %v", cc, err)
	}
	if _, err := h.RunCode(ctx, platinum.RunCodeRequest{Code: "var j = 2", ContextID: cc.ID}); err != nil {
		t.Fatal(err)
	}
	if ex, err := h.RunCode(ctx, platinum.RunCodeRequest{Code: "j * 21", ContextID: cc.ID}); err != nil || ex.Text() != "42" {
		t.Fatalf("js context: %+v %v", ex, err)
	}
	list, err := cl.Sandboxes.ListCodeContexts(ctx, id)
	if err != nil || len(list) < 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := cl.Sandboxes.DeleteCodeContext(ctx, id, cc.ID); err != nil {
		t.Fatal(err)
	}
	_, err = h.RunCode(ctx, platinum.RunCodeRequest{Code: "1", ContextID: cc.ID})
	var ae *platinum.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 404 {
		t.Fatalf("deleted context: %v", err)
	}
	ts, err := h.RunCode(ctx, platinum.RunCodeRequest{Code: "const n: number = 41\nn + 1", Language: "typescript"})
	if err != nil || ts.Text() != "42" {
		t.Fatalf("typescript: %+v %v", ts, err)
	}
}

// TestCLIRunCode: `pt sandbox run-code` reads the cell from a file or
// stdin, streams stdout, prints the main result, saves images, and exits 1
// with the traceback for a cell that raises.
func TestCLIRunCode(t *testing.T) {
	c := newClient(t)
	id := c.create("")
	dir := t.TempDir()
	pt := func(stdin string, args ...string) (string, string, int) {
		cmd := exec.Command(filepath.Join(env.binDir, "pt"), args...)
		cmd.Env = append(os.Environ(), "PT_API_URL="+env.url, "PT_TOKEN="+env.token)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr, cmd.Stdin = &o, &e, strings.NewReader(stdin)
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	file := filepath.Join(dir, "cell.py")
	os.WriteFile(file, []byte("print('hi')\n6 * 7\n"), 0o644)
	if out, errOut, code := pt("", "sandbox", "run-code", id, file); code != 0 || out != "hi\n42\n" {
		t.Errorf("file: %d %q %q", code, out, errOut)
	}
	plot := "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n"
	if _, errOut, code := pt(plot, "sandbox", "run-code", "--images", dir, id, "-"); code != 0 || !strings.Contains(errOut, "result-1.png") {
		t.Errorf("plot: %d %q", code, errOut)
	}
	if f, err := os.Open(filepath.Join(dir, "result-1.png")); err != nil {
		t.Error(err)
	} else {
		if _, format, err := image.Decode(f); err != nil || format != "png" {
			t.Errorf("the saved image does not decode as a PNG: %s %v", format, err)
		}
		f.Close()
	}
	svg := "from IPython.display import SVG\nSVG('<svg xmlns=\"http://www.w3.org/2000/svg\"><circle r=\"2\"/></svg>')\n"
	if _, errOut, code := pt(svg, "sandbox", "run-code", "--images", dir, id, "-"); code != 0 || !strings.Contains(errOut, "result-1.svg") {
		t.Errorf("svg: %d %q", code, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "result-1.svg")); !bytes.Contains(b, []byte("<circle")) {
		t.Errorf("saved SVG: %q", b)
	}
	if out, _, code := pt("const n: number = 2\nn * 21", "sandbox", "run-code", "--language", "typescript", id); code != 0 || out != "42\n" {
		t.Errorf("typescript: %d %q", code, out)
	}
	if out, _, code := pt("console.log(1 + 1)", "sandbox", "run-code", "--language", "javascript", id); code != 0 || out != "2\n" {
		t.Errorf("javascript: %d %q", code, out)
	}
	if _, errOut, code := pt("1/0", "sandbox", "run-code", id); code != 1 || !strings.Contains(errOut, "ZeroDivisionError") {
		t.Errorf("1/0: %d %q", code, errOut)
	}
}
