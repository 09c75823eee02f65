package codeinterp

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/jpeg" // image.Decode of the JPEG result
	_ "image/png"  // image.Decode of the PNG results
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// streamed is a cell whose events are read as they arrive.
type streamed struct {
	t      *testing.T
	id     string // the execution's ID (X-Execution-Id)
	resp   *http.Response
	rd     *bufio.Reader
	events cell
	at     []time.Time // when each event arrived
}

// stream starts a cell and returns once its answer's headers are in.
func (c *client) stream(id string, body map[string]any) *streamed {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", env.url+"/v1/sandboxes/"+id+"/code", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		c.t.Fatalf("stream %v: %d", body, resp.StatusCode)
	}
	return &streamed{t: c.t, id: resp.Header.Get("X-Execution-Id"), resp: resp, rd: bufio.NewReader(resp.Body)}
}

// next reads one event (false at the stream's end).
func (s *streamed) next() (event, bool) {
	s.t.Helper()
	for {
		line, err := s.rd.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var e event
			if err := json.Unmarshal(line, &e); err != nil {
				s.t.Fatalf("event %q: %v", line, err)
			}
			s.events = append(s.events, e)
			s.at = append(s.at, time.Now())
			return e, true
		}
		if err != nil {
			return event{}, false
		}
	}
}

// rest reads the events up to the stream's end and checks it ends with
// exactly one end event.
func (s *streamed) rest() cell {
	s.t.Helper()
	for {
		if _, ok := s.next(); !ok {
			break
		}
	}
	if len(s.events) == 0 || s.events.end().Type != "end" {
		s.t.Fatalf("no end event last: %+v", s.events)
	}
	return s.events
}

// results returns a cell's result events, main or not, in order.
func (c cell) results() []event {
	var out []event
	for _, e := range c {
		if e.Type == "result" {
			out = append(out, e)
		}
	}
	return out
}

// decodeImage decodes a base64 image of a result and checks its format.
func decodeImage(t *testing.T, e event, mime, format string) image.Image {
	t.Helper()
	s, _ := e.Data[mime].(string)
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("%s is not base64: %v", mime, err)
	}
	img, got, err := image.Decode(bytes.NewReader(raw))
	if err != nil || got != format {
		t.Fatalf("%s (%d bytes) does not decode as %s: %s %v", mime, len(raw), format, got, err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("%s is %v", mime, b)
	}
	return img
}

// testRichResults: what IPython users rely on beyond text — display()
// output in order before the main result, _repr_html_, SVG, JSON,
// Markdown, LaTeX, a matplotlib figure as the last expression, JPEG and
// PDF, and scipy.
func testRichResults(t *testing.T, c *client, id string) {
	got := c.py(id, `from IPython.display import display, HTML, SVG, JSON, Markdown, Math
class Card:
    def _repr_html_(self):
        return '<div class="card">hi</div>'
display('shown first')
display(HTML('<b>bold</b>'))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>'))
display(JSON({'a': [1, 2]}))
display(Markdown('# Title'))
display(Math(r'x^2'))
Card()`)
	rs := got.results()
	if len(rs) != 7 {
		t.Fatalf("%d results, want 7: %+v", len(rs), got)
	}
	for i, want := range []struct{ mime, has string }{
		{"text/plain", "'shown first'"},
		{"text/html", "<b>bold</b>"},
		{"image/svg+xml", "<rect"},
		{"application/json", ""},
		{"text/markdown", "# Title"},
		{"text/latex", "x^2"},
		{"text/html", `<div class="card">hi</div>`},
	} {
		r := rs[i]
		if r.IsMainResult != (i == 6) {
			t.Errorf("result %d: is_main_result %v", i, r.IsMainResult)
		}
		v, ok := r.Data[want.mime]
		if !ok {
			t.Errorf("result %d lacks %s: %v", i, want.mime, r.Data)
			continue
		}
		if s, _ := v.(string); want.has != "" && !strings.Contains(s, want.has) {
			t.Errorf("result %d %s = %q, want it to contain %q", i, want.mime, s, want.has)
		}
	}
	if j, _ := json.Marshal(rs[3].Data["application/json"]); string(j) != `{"a":[1,2]}` {
		t.Errorf("application/json = %s", j)
	}

	fig := c.py(id, "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2, 3], [3, 1, 2])\nfig")
	m, ok := fig.main()
	if !ok {
		t.Fatalf("a figure as the last expression has no main result: %+v", fig)
	}
	decodeImage(t, m, "image/png", "png")

	doc := c.py(id, `import io
from IPython.display import Image
buf = io.BytesIO()
fig.savefig(buf, format='jpeg')
class Doc:
    def _repr_pdf_(self):
        b = io.BytesIO()
        fig.savefig(b, format='pdf')
        return b.getvalue()
display(Image(buf.getvalue(), format='jpeg'))
Doc()`)
	rs = doc.results()
	if len(rs) != 2 {
		t.Fatalf("jpeg and pdf: %+v", doc)
	}
	decodeImage(t, rs[0], "image/jpeg", "jpeg")
	pdf, _ := rs[1].Data["application/pdf"].(string)
	if raw, err := base64.StdEncoding.DecodeString(pdf); err != nil || !bytes.HasPrefix(raw, []byte("%PDF-")) {
		t.Errorf("application/pdf: %.40q %v", raw, err)
	}

	if s := c.py(id, "import scipy.stats\nround(float(scipy.stats.norm.cdf(0)), 3)").text(); s != "0.5" {
		t.Errorf("scipy: %q", s)
	}
}

// testStreamingCwdDuration: stdout reaches the client while the cell still
// runs; cwd lasts for one call in every language; end carries the
// execution's ID and its duration.
func testStreamingCwdDuration(t *testing.T, c *client, id string) {
	s := c.stream(id, map[string]any{"code": "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')"})
	got := s.rest()
	if got.stdout() != "first\nsecond\n" || got[0].Type != "stdout" {
		t.Fatalf("print, sleep, print: %+v", got)
	}
	if gap := s.at[len(s.at)-1].Sub(s.at[0]); gap < time.Second {
		t.Errorf("the first line came %v before the end: it was not streamed", gap)
	}
	end := got.end()
	if !strings.HasPrefix(s.id, "exec_") || end.ExecutionID != s.id {
		t.Errorf("execution id: header %q, end %q", s.id, end.ExecutionID)
	}
	if end.DurationMS < 1500 || end.DurationMS > 60000 {
		t.Errorf("duration_ms %v for a 1.5 s cell", end.DurationMS)
	}

	for _, tc := range []struct{ lang, code, want string }{
		{"python", "import os\nos.getcwd()", "'/etc'"},
		{"javascript", "process.cwd()", "'/etc'"},
		{"typescript", "(process.cwd() as string)", "'/etc'"},
	} {
		if got := c.run(id, map[string]any{"code": tc.code, "language": tc.lang, "cwd": "/etc"}).text(); got != tc.want {
			t.Errorf("%s with cwd /etc: %q", tc.lang, got)
		}
		if got := c.run(id, map[string]any{"code": tc.code, "language": tc.lang}).text(); got == tc.want || got == "" {
			t.Errorf("%s: the cwd outlived its call: %q", tc.lang, got)
		}
	}
	if got := c.run(id, map[string]any{"code": "pwd", "language": "bash", "cwd": "/etc"}).stdout(); got != "/etc\n" {
		t.Errorf("bash with cwd /etc: %q", got)
	}
	if got := c.run(id, map[string]any{"code": "pwd", "language": "bash"}).stdout(); got == "/etc\n" {
		t.Errorf("bash: the cwd outlived its call")
	}
}

// testEnvRemoval: a variable an env PATCH removes (null) is gone for the
// next cell of every language, in contexts that saw it.
func testEnvRemoval(t *testing.T, c *client, id string) {
	if r := c.do("PATCH", "/v1/sandboxes/"+id+"/env", map[string]any{"env": map[string]any{"CI_GONE": "here"}}); r.Status != 200 {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	checks := []struct{ lang, code string }{
		{"python", "import os\nprint(os.environ.get('CI_GONE', 'unset'))"},
		{"javascript", "console.log(process.env.CI_GONE ?? 'unset')"},
		{"typescript", "console.log(process.env.CI_GONE ?? 'unset')"},
		{"bash", "echo ${CI_GONE-unset}"},
	}
	for _, ck := range checks {
		if got := c.run(id, map[string]any{"code": ck.code, "language": ck.lang}).stdout(); got != "here\n" {
			t.Errorf("%s after the patch: %q", ck.lang, got)
		}
	}
	if r := c.do("PATCH", "/v1/sandboxes/"+id+"/env", map[string]any{"env": map[string]any{"CI_GONE": nil}}); r.Status != 200 {
		t.Fatalf("patch null: %d %s", r.Status, r.Body)
	}
	for _, ck := range checks {
		if got := c.run(id, map[string]any{"code": ck.code, "language": ck.lang}).stdout(); got != "unset\n" {
			t.Errorf("%s after the removal: %q", ck.lang, got)
		}
	}
}

// testInterruptsPerLanguage: a JavaScript, TypeScript or bash cell past its
// timeout, or deleted while it runs, stops; its context keeps its state,
// its process is not replaced, and (bash) the rest of the cell never runs.
func testInterruptsPerLanguage(t *testing.T, c *client, id string) {
	for _, tc := range []struct {
		lang, set, loop, check, want string
	}{
		{"javascript", "var keptJs = 'kept'", "console.log('started'); while (true) {}", "keptJs", "'kept'"},
		{"javascript", "var keptJs = 'kept'", "console.log('started'); new Promise((r) => setTimeout(r, 600000))", "keptJs", "'kept'"},
		{"typescript", "const keptTs: string = 'kept'", "console.log('started')\nfor (let spins: number = 0; ; spins++) {}", "keptTs", "'kept'"},
		{"bash", "KEPT_SH=kept", "echo started; while true; do sleep 0.1; done; AFTER_SH=ran", "echo $KEPT_SH ${AFTER_SH:-unset}", "kept unset\n"},
	} {
		t.Run(tc.lang+" "+tc.loop[:min(len(tc.loop), 40)], func(t *testing.T) {
			c := &client{t: t, token: c.token}
			check := func(when string) {
				t.Helper()
				got := c.run(id, map[string]any{"code": tc.check, "language": tc.lang})
				out := got.text()
				if tc.lang == "bash" {
					out = got.stdout()
				}
				if out != tc.want || got[0].Type == "kernel_restarted" {
					t.Errorf("after the %s: %+v", when, got)
				}
			}
			if got := c.run(id, map[string]any{"code": tc.set, "language": tc.lang}); got.end().Status != "ok" {
				t.Fatalf("set: %+v", got)
			}
			got := c.run(id, map[string]any{"code": tc.loop, "language": tc.lang, "timeout_ms": 2000})
			if e, ok := got.err(); !ok || e.Name != "TimeoutError" || got.end().Status != "timeout" || !strings.Contains(e.Value, "keeps its state") {
				t.Errorf("timed-out cell: %+v", got)
			}
			check("timeout")

			s := c.stream(id, map[string]any{"code": tc.loop, "language": tc.lang})
			if e, _ := s.next(); e.Type != "stdout" || !strings.Contains(e.Text, "started") {
				t.Fatalf("first event %+v", e)
			}
			if r := c.do("DELETE", "/v1/sandboxes/"+id+"/code/executions/"+s.id, nil); r.Status != 204 {
				t.Fatalf("delete: %d %s", r.Status, r.Body)
			}
			got = s.rest()
			if e, ok := got.err(); !ok || e.Name != "Interrupted" || got.end().Status != "interrupted" {
				t.Errorf("deleted cell: %+v", got)
			}
			check("delete")
		})
	}
}

// testHarderInterrupts: a cell that ignores SIGINT is killed once the
// grace period (3 s) is over; its context gets a fresh process, and the
// next call says so first. Each language in a context of its own.
func testHarderInterrupts(t *testing.T, c *client, id string) {
	for _, tc := range []struct{ lang, set, ignore, check string }{
		{"python", "doomed = 1", "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", "'doomed' in globals()"},
		{"javascript", "var doomed = 1", `require('child_process').execSync("trap '' INT; while :; do :; done")`, "typeof doomed === 'number'"},
		{"bash", "DOOMED=1", "trap '' INT\nwhile :; do :; done", "[ -n \"$DOOMED\" ] && echo True || echo False"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			c := &client{t: t, token: c.token}
			r := c.do("POST", "/v1/sandboxes/"+id+"/code/contexts", map[string]any{"language": tc.lang})
			ctxID, _ := r.JSON()["id"].(string)
			if r.Status != 201 {
				t.Fatalf("context: %d %s", r.Status, r.Body)
			}
			t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id+"/code/contexts/"+ctxID, nil) })
			c.run(id, map[string]any{"code": tc.set, "context_id": ctxID})
			got := c.run(id, map[string]any{"code": tc.ignore, "context_id": ctxID, "timeout_ms": 2000})
			e, ok := got.err()
			if !ok || e.Name != "TimeoutError" || got.end().Status != "timeout" || !strings.Contains(e.Value, "replaced") {
				t.Errorf("a cell ignoring SIGINT: %+v", got)
			}
			// 2 s to the first SIGINT, then the 3 s grace.
			if d := got.end().DurationMS; d < 4900 || d > 60000 {
				t.Errorf("killed after %v ms, want 2 s + 3 s grace", d)
			}
			next := c.run(id, map[string]any{"code": tc.check, "context_id": ctxID})
			out := next.text()
			if tc.lang == "bash" {
				out = strings.TrimSpace(next.stdout())
			} else if tc.lang == "javascript" {
				out = map[string]string{"true": "True", "false": "False"}[out]
			}
			if next[0].Type != "kernel_restarted" || !strings.Contains(next[0].Reason, "SIGINT") || out != "False" {
				t.Errorf("the next call: %+v", next)
			}
			if again := c.run(id, map[string]any{"code": tc.set, "context_id": ctxID}); again[0].Type == "kernel_restarted" {
				t.Errorf("the restart was said twice")
			}
		})
	}
}

// testDeleteExecution: DELETE of a running Python cell interrupts it (the
// context keeps its state); a cell waiting behind it is listed as waiting
// and, deleted, never runs; an ended execution is 404.
func testDeleteExecution(t *testing.T, c *client, id string) {
	base := "/v1/sandboxes/" + id + "/code/executions"
	a := c.stream(id, map[string]any{"code": "import time\nbefore_del = 1\nprint('sleeping', flush=True)\ntime.sleep(60)\nafter_del = 1"})
	if e, _ := a.next(); e.Type != "stdout" {
		t.Fatalf("first event %+v", e)
	}
	b := c.stream(id, map[string]any{"code": "queued_ran = True"})
	var list struct {
		Executions []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"executions"`
	}
	// The second cell reaches the server a moment after its headers.
	deadline := time.Now().Add(10 * time.Second)
	states := map[string]string{}
	for time.Now().Before(deadline) && states[b.id] == "" {
		r := c.do("GET", base, nil)
		if err := json.Unmarshal(r.Body, &list); err != nil || r.Status != 200 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		states = map[string]string{}
		for _, e := range list.Executions {
			states[e.ID] = e.State
		}
	}
	if states[a.id] != "running" || states[b.id] != "waiting" {
		t.Errorf("executions %s (a %s, b %s)", c.do("GET", base, nil).Body, a.id, b.id)
	}
	t0 := time.Now()
	if r := c.do("DELETE", base+"/"+b.id, nil); r.Status != 204 || time.Since(t0) > 10*time.Second {
		t.Errorf("delete of the waiting cell: %d %s after %v", r.Status, r.Body, time.Since(t0))
	}
	if got := b.rest(); got.end().Status != "interrupted" {
		t.Errorf("the waiting cell's stream: %+v", got)
	}
	if r := c.do("DELETE", base+"/"+a.id, nil); r.Status != 204 {
		t.Errorf("delete: %d %s", r.Status, r.Body)
	}
	got := a.rest()
	if e, ok := got.err(); !ok || e.Name != "Interrupted" || got.end().Status != "interrupted" || got.end().ExecutionID != a.id {
		t.Errorf("the deleted cell: %+v", got)
	}
	if r := c.do("DELETE", base+"/"+a.id, nil); r.Status != 404 || r.JSON()["code"] != "not_found" {
		t.Errorf("delete of an ended execution: %d %s", r.Status, r.Body)
	}
	if s := c.py(id, "('before_del' in globals(), 'after_del' in globals(), 'queued_ran' in globals())").text(); s != "(True, False, False)" {
		t.Errorf("after the deletes: %s", s)
	}
	if r := c.do("GET", base, nil); !strings.Contains(string(r.Body), `"executions":[]`) {
		t.Errorf("executions after: %s", r.Body)
	}
}

// testProcessDeaths: a JavaScript or bash cell that ends its process
// reports KernelDied; the next gets a fresh one and is told so, once.
func testProcessDeaths(t *testing.T, c *client, id string) {
	for _, tc := range []struct{ lang, set, die, check, want string }{
		{"javascript", "var gone = 1", "process.exit(3)", "typeof gone", "'undefined'"},
		{"bash", "GONE=1", "exit 3", "echo ${GONE:-unset}", "unset\n"},
	} {
		c.run(id, map[string]any{"code": tc.set, "language": tc.lang})
		if e, ok := c.run(id, map[string]any{"code": tc.die, "language": tc.lang}).err(); !ok || e.Name != "KernelDied" {
			t.Errorf("%s: %s: %+v", tc.lang, tc.die, e)
		}
		next := c.run(id, map[string]any{"code": tc.check, "language": tc.lang})
		out := next.text()
		if tc.lang == "bash" {
			out = next.stdout()
		}
		if next[0].Type != "kernel_restarted" || out != tc.want {
			t.Errorf("%s after the death: %+v", tc.lang, next)
		}
		if again := c.run(id, map[string]any{"code": tc.check, "language": tc.lang}); again[0].Type == "kernel_restarted" {
			t.Errorf("%s: the restart was said twice", tc.lang)
		}
	}
}

// TestRunCodeNeedsTheTemplate: a sandbox of another template has no code
// interpreter: 503 code_interpreter_unavailable, naming the template.
func TestRunCodeNeedsTheTemplate(t *testing.T) {
	c := newClient(t)
	r := c.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", map[string]any{"template": "busybox"})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	got := c.do("POST", "/v1/sandboxes/"+id+"/code", map[string]any{"code": "1"})
	if got.Status != 503 || got.JSON()["code"] != "code_interpreter_unavailable" || !strings.Contains(string(got.Body), "code-interpreter") {
		t.Errorf("run code in busybox: %d %s", got.Status, got.Body)
	}
}

// testInterruptsAtRandom: interrupts sent at random moments while a
// context runs many short cells (so many land at a cell's start or end)
// stop at most their cell; the context's process never dies and keeps its
// state. node died of a SIGINT landing as breakOnSigint's watchdog started
// or stopped, ipykernel of a KeyboardInterrupt as a request ended, and
// bash 5.2 spun forever on a SIGINT landing as it waited for the `rm` that
// ended each cell (the server now removes the cell's file itself).
func testInterruptsAtRandom(t *testing.T, c *client, id string) {
	for _, tc := range []struct{ lang, set, cell, check, want string }{
		{"python", "kept_rand = 'kept'", "n_rand = sum(range(1000))", "kept_rand", "'kept'"},
		{"javascript", "var keptRand = 'kept'", "for (let i = 0; i < 1e5; i++) {}", "keptRand", "'kept'"},
		{"typescript", "const keptRand: string = 'kept'", "let nRand: number = 0", "keptRand", "'kept'"},
		{"bash", "KEPT_RAND=kept", "N_RAND=$((N_RAND+1))", "echo $KEPT_RAND", "kept\n"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			c := &client{t: t, token: c.token}
			// The language's default context, which earlier subtests
			// started: no more processes in the sandbox's memory.
			ctxID := "ctx_default_" + tc.lang
			died := func(got cell) bool {
				for _, e := range got {
					if e.Type == "kernel_restarted" || e.Name == "KernelDied" {
						return true
					}
				}
				return false
			}
			// By language: it starts the default context if no earlier
			// subtest did (a run of this subtest alone).
			if got := c.run(id, map[string]any{"code": tc.set, "language": tc.lang}); got.end().Status != "ok" || got.end().ContextID != ctxID {
				t.Fatalf("set: %+v", got)
			}
			done := make(chan struct{})
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				for {
					select {
					case <-done:
						return
					case <-time.After(time.Duration(rand.IntN(5000)) * time.Microsecond):
					}
					_, _ = c.raw("POST", "/v1/sandboxes/"+id+"/code/contexts/"+ctxID+"/interrupt", nil)
				}
			}()
			// At least 100 cells, and on until some were interrupted: on
			// runc a JavaScript cell takes ~2 ms, so 100 of them can all
			// fall between interrupts (which are dropped for a cell that
			// has ended).
			interrupted, cells := 0, 0
			for i := 0; i < 100 || interrupted < 3 && i < 1000; i++ {
				cells++
				got := c.run(id, map[string]any{"code": tc.cell, "context_id": ctxID})
				if died(got) {
					close(done)
					<-stopped
					t.Fatalf("cell %d: the context's process died: %+v", i+1, got)
				}
				if got.end().Status == "interrupted" {
					interrupted++
				}
			}
			close(done)
			<-stopped
			got := c.run(id, map[string]any{"code": tc.check, "context_id": ctxID})
			out := got.text()
			if tc.lang == "bash" {
				out = got.stdout()
			}
			if died(got) || out != tc.want {
				t.Errorf("after %d cells (%d interrupted): %+v", cells, interrupted, got)
			}
			if interrupted == 0 {
				t.Errorf("no cell of %d was interrupted: the test did not test", cells)
			}
		})
	}
}
