package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunCodeSavesResults: `pt sandbox run-code` streams output, prints the
// main result and saves every PNG, JPEG, SVG and PDF result to its own
// file, named in order, with the bytes the kernel sent.
func TestRunCodeSavesResults(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\npng-bytes")
	jpeg := []byte("\xff\xd8\xff\xe0jpeg-bytes")
	pdf := []byte("%PDF-1.4 pdf-bytes")
	svg := `<svg xmlns="http://www.w3.org/2000/svg"><circle r="4"/></svg>`
	b64 := base64.StdEncoding.EncodeToString
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintf(w, "%s\n", `{"type":"stdout","text":"hi\n"}`)
		fmt.Fprintf(w, `{"type":"result","is_main_result":false,"data":{"text/plain":"<Figure>","image/png":%q}}`+"\n", b64(png))
		fmt.Fprintf(w, `{"type":"result","is_main_result":false,"data":{"image/jpeg":%q,"application/pdf":%q}}`+"\n", b64(jpeg), b64(pdf))
		fmt.Fprintf(w, `{"type":"result","is_main_result":true,"data":{"text/plain":"<SVG>","image/svg+xml":%q}}`+"\n", svg)
		fmt.Fprintf(w, "%s\n", `{"type":"end","execution_id":"exec_1","context_id":"ctx_default_typescript","execution_count":1,"status":"ok","duration_ms":3}`)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	var stdout, stderr strings.Builder
	a := &app{
		stdout: &stdout, stderr: &stderr, stdin: strings.NewReader("draw()"),
		getenv:       func(k string) string { return map[string]string{"PT_API_URL": srv.URL, "PT_TOKEN": "tok"}[k] },
		pollInterval: time.Millisecond,
	}
	if code := a.run(t.Context(), []string{"sandbox", "run-code", "--language", "typescript", "--images", dir, "sbx_1", "-"}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stdout.String() != "hi\n<SVG>\n" {
		t.Errorf("stdout %q", stdout.String())
	}
	if !strings.Contains(body, `"language":"typescript"`) || !strings.Contains(body, `"code":"draw()"`) {
		t.Errorf("request %s", body)
	}
	for name, want := range map[string][]byte{"result-1.png": png, "result-2.jpg": jpeg, "result-3.pdf": pdf, "result-4.svg": []byte(svg)} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %q %v, want %q", name, got, err, want)
		}
		if !strings.Contains(stderr.String(), "saved "+filepath.Join(dir, name)) {
			t.Errorf("stderr does not name %s: %q", name, stderr.String())
		}
	}
	if files, _ := os.ReadDir(dir); len(files) != 4 {
		t.Errorf("%d files saved, want 4", len(files))
	}
}

// TestRunCodeHelpNamesTypeScript: the --language help lists every
// language the API takes.
func TestRunCodeHelpNamesTypeScript(t *testing.T) {
	t.Parallel()
	var stdout, stderr strings.Builder
	a := &app{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
	a.run(t.Context(), []string{"sandbox", "run-code", "--help"})
	help := stdout.String() + stderr.String()
	for _, lang := range []string{"python", "javascript", "typescript", "bash"} {
		if !strings.Contains(help, lang) {
			t.Errorf("help lacks %s:\n%s", lang, help)
		}
	}
}
