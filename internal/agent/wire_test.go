package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/agent"
	"github.com/platinum-dev/platinum/internal/testenv"
)

func TestAuth(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name       string
		method     string
		path       string
		token      string
		wantStatus int
	}{
		{"health needs no token", http.MethodGet, "/health", "", http.StatusNoContent},
		{"envs without token", http.MethodGet, "/envs", "", http.StatusUnauthorized},
		{"envs with wrong token", http.MethodGet, "/envs", "nope", http.StatusUnauthorized},
		{"envs with token", http.MethodGet, "/envs", testToken, http.StatusOK},
		{"metrics without token", http.MethodGet, "/metrics", "", http.StatusUnauthorized},
		{"files without token", http.MethodGet, "/files?path=/etc/hostname", "", http.StatusUnauthorized},
		{"init without token", http.MethodPost, "/init", "", http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, e.ts.URL+tc.path, nil)
			if tc.token != "" {
				req.Header.Set("X-Access-Token", tc.token)
			}
			resp, err := e.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if tc.wantStatus == http.StatusUnauthorized {
				var body map[string]any
				if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
					t.Fatal(err)
				}
				if body["code"] != float64(401) || body["message"] == "" {
					t.Fatalf("body = %v, want code 401 and a message", body)
				}
			}
		})
	}

	t.Run("rpc without token", func(t *testing.T) {
		status, body := e.rawJSON(t, "/filesystem.Filesystem/Stat", `{"path":"/"}`, nil)
		if status != http.StatusUnauthorized || body["code"] != "unauthenticated" {
			t.Fatalf("got %d %v, want 401 unauthenticated", status, body)
		}
	})
	t.Run("stream without token", func(t *testing.T) {
		_, envs := e.rawStream(t, "/process.Process/Start", `{"process":{"cmd":"/bin/true"}}`, nil)
		last := envs[len(envs)-1]
		if last.flags != 2 || !regexp.MustCompile(`"code":"unauthenticated"`).MatchString(last.data) {
			t.Fatalf("end of stream = %+v, want unauthenticated error", last)
		}
	})
}

func TestWireStartStream(t *testing.T) {
	e := newEnv(t)
	body := `{"process":{"cmd":"/bin/sh","args":["-c","printf hi; exit 3"]},"stdin":false}`
	status, envs := e.rawStream(t, "/process.Process/Start", body, map[string]string{"X-Access-Token": testToken})
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	if len(envs) < 3 {
		t.Fatalf("got %d envelopes, want start, data..., end, end-stream: %+v", len(envs), envs)
	}
	if !regexp.MustCompile(`^\{"event":\{"start":\{"pid":[1-9][0-9]*\}\}\}$`).MatchString(envs[0].data) || envs[0].flags != 0 {
		t.Fatalf("first envelope = %+v, want {\"event\":{\"start\":{\"pid\":N}}}", envs[0])
	}
	want := []envelope{
		{0, `{"event":{"data":{"stdout":"aGk="}}}`},
		{0, `{"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3","error":"exit status 3"}}}`},
		{2, `{}`},
	}
	if diff := cmp.Diff(want, envs[1:], cmp.AllowUnexported(envelope{})); diff != "" {
		t.Fatalf("envelopes (-want +got):\n%s", diff)
	}
}

func TestWireErrors(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	auth := map[string]string{"X-Access-Token": testToken}
	mk := fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "a", "b"))
	tests := []struct {
		name       string
		path, body string
		wantStatus int
		wantCode   string
	}{
		{"stat missing", "/filesystem.Filesystem/Stat", fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "missing")), 404, "not_found"},
		{"stat dotdot", "/filesystem.Filesystem/Stat", `{"path":"/tmp/../etc"}`, 400, "invalid_argument"},
		{"mkdir first", "/filesystem.Filesystem/MakeDir", mk, 200, ""},
		{"mkdir again", "/filesystem.Filesystem/MakeDir", mk, 409, "already_exists"},
		{"list a file", "/filesystem.Filesystem/ListDir", fmt.Sprintf(`{"path":%q}`, "/etc/hostname"), 400, "invalid_argument"},
		{"signal unknown pid", "/process.Process/SendSignal", `{"process":{"pid":999999},"signal":"SIGNAL_SIGKILL"}`, 404, "not_found"},
		{"input unknown pid", "/process.Process/SendInput", `{"process":{"pid":999999},"input":{"stdin":"aGk="}}`, 404, "not_found"},
	}
	for _, tc := range tests { // sequential: mkdir first, then again
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.rawJSON(t, tc.path, tc.body, auth)
			if status != tc.wantStatus {
				t.Fatalf("status = %d, want %d (body %v)", status, tc.wantStatus, body)
			}
			if tc.wantCode != "" && body["code"] != tc.wantCode {
				t.Fatalf("code = %v, want %s", body["code"], tc.wantCode)
			}
		})
	}

	t.Run("bad cwd ends the stream with invalid_argument", func(t *testing.T) {
		_, envs := e.rawStream(t, "/process.Process/Start", `{"process":{"cmd":"/bin/true","cwd":"/nonexistent-dir"}}`, auth)
		if len(envs) != 1 || envs[0].flags != 2 || !regexp.MustCompile(`"code":"invalid_argument"`).MatchString(envs[0].data) {
			t.Fatalf("envelopes = %+v, want one end-stream with invalid_argument", envs)
		}
	})
}

func TestWireStat(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	f := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(f, []byte("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	status, body := e.rawJSON(t, "/filesystem.Filesystem/Stat", fmt.Sprintf(`{"path":%q}`, f), map[string]string{"X-Access-Token": testToken})
	if status != 200 {
		t.Fatalf("status %d: %v", status, body)
	}
	entry := body["entry"].(map[string]any)
	delete(entry, "modifiedTime")
	delete(entry, "owner")
	delete(entry, "group")
	want := map[string]any{"name": "f.txt", "type": "FILE_TYPE_FILE", "path": f, "size": "5", "mode": float64(0o640), "permissions": "-rw-r-----"}
	if diff := cmp.Diff(want, entry); diff != "" {
		t.Fatalf("entry (-want +got):\n%s", diff)
	}
}

func TestFilesHTTP(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	do := func(t *testing.T, req *http.Request) (int, []byte) {
		t.Helper()
		if req.Header.Get("X-Access-Token") == "" && req.URL.Query().Get("signature") == "" {
			req.Header.Set("X-Access-Token", testToken)
		}
		return e.do(t, req)
	}

	t.Run("multipart multi-file", func(t *testing.T) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		files := map[string]string{filepath.Join(dir, "m", "one.txt"): "first", filepath.Join(dir, "m", "deep", "two.bin"): "\x00\x01second"}
		for _, p := range []string{filepath.Join(dir, "m", "one.txt"), filepath.Join(dir, "m", "deep", "two.bin")} {
			w, err := mw.CreateFormFile("file", p)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(w, files[p])
		}
		mw.Close()
		req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/files", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		status, resp := do(t, req)
		if status != 200 {
			t.Fatalf("status %d: %s", status, resp)
		}
		var got []map[string]string
		if err := json.Unmarshal(resp, &got); err != nil {
			t.Fatal(err)
		}
		want := []map[string]string{
			{"path": filepath.Join(dir, "m", "one.txt"), "name": "one.txt", "type": "file"},
			{"path": filepath.Join(dir, "m", "deep", "two.bin"), "name": "two.bin", "type": "file"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("answer (-want +got):\n%s", diff)
		}
		for p, content := range files {
			b, err := os.ReadFile(p)
			if err != nil || string(b) != content {
				t.Fatalf("%s = %q, %v; want %q", p, b, err, content)
			}
		}
	})

	t.Run("multipart with path query", func(t *testing.T) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		w, _ := mw.CreateFormFile("file", "ignored-name")
		io.WriteString(w, "via query")
		mw.Close()
		target := filepath.Join(dir, "q", "target.txt")
		req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/files?path="+url.QueryEscape(target), &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		if status, resp := do(t, req); status != 200 {
			t.Fatalf("status %d: %s", status, resp)
		}
		if b, _ := os.ReadFile(target); string(b) != "via query" {
			t.Fatalf("target = %q", b)
		}
	})

	t.Run("download", func(t *testing.T) {
		p := filepath.Join(dir, "dl.bin")
		os.WriteFile(p, []byte("0123456789"), 0o644)
		req, _ := http.NewRequest(http.MethodGet, e.ts.URL+"/files?path="+url.QueryEscape(p), nil)
		if status, b := do(t, req); status != 200 || string(b) != "0123456789" {
			t.Fatalf("got %d %q", status, b)
		}
		req, _ = http.NewRequest(http.MethodGet, e.ts.URL+"/files?path="+url.QueryEscape(p), nil)
		req.Header.Set("Range", "bytes=2-4")
		if status, b := do(t, req); status != http.StatusPartialContent || string(b) != "234" {
			t.Fatalf("range: got %d %q", status, b)
		}
	})

	errTests := []struct {
		name       string
		method     string
		query      string
		wantStatus int
		wantCode   string
	}{
		{"download missing", http.MethodGet, "path=" + url.QueryEscape(filepath.Join(dir, "nope")), 404, ""},
		{"download directory", http.MethodGet, "path=" + url.QueryEscape(dir), 400, ""},
		{"download dotdot", http.MethodGet, "path=" + url.QueryEscape(dir+"/../x"), 400, "invalid_path"},
		{"upload dotdot", http.MethodPost, "path=" + url.QueryEscape(dir+"/a/../../x"), 400, "invalid_path"},
		{"upload without path", http.MethodPost, "", 400, ""},
	}
	for _, tc := range errTests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, e.ts.URL+"/files?"+tc.query, bytes.NewReader([]byte("x")))
			req.Header.Set("Content-Type", "application/octet-stream")
			status, b := do(t, req)
			if status != tc.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", status, tc.wantStatus, b)
			}
			var body map[string]any
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("body %q: %v", b, err)
			}
			if body["code"] != float64(tc.wantStatus) || body["message"] == "" {
				t.Fatalf("body = %v", body)
			}
			if tc.wantCode != "" && body["error_code"] != tc.wantCode {
				t.Fatalf("error_code = %v, want %s", body["error_code"], tc.wantCode)
			}
		})
	}

	t.Run("signed URLs", func(t *testing.T) {
		p := filepath.Join(dir, "signed.txt")
		exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
		sig := agent.Signature(p + ":write:root:" + testToken + ":" + exp)
		q := url.Values{"path": {p}, "username": {"root"}, "signature": {sig}, "signature_expiration": {exp}}
		req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/files?"+q.Encode(), bytes.NewReader([]byte("signed")))
		req.Header.Set("Content-Type", "application/octet-stream")
		if status, b := do(t, req); status != 200 {
			t.Fatalf("signed upload: %d %s", status, b)
		}
		// The write signature does not allow reading.
		req, _ = http.NewRequest(http.MethodGet, e.ts.URL+"/files?"+q.Encode(), nil)
		if status, _ := do(t, req); status != http.StatusUnauthorized {
			t.Fatalf("read with write signature: %d, want 401", status)
		}
		q.Set("signature", agent.Signature(p+":read:root:"+testToken+":"+exp))
		req, _ = http.NewRequest(http.MethodGet, e.ts.URL+"/files?"+q.Encode(), nil)
		if status, b := do(t, req); status != 200 || string(b) != "signed" {
			t.Fatalf("signed download: %d %q", status, b)
		}
		old := strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10)
		q.Set("signature_expiration", old)
		q.Set("signature", agent.Signature(p+":read:root:"+testToken+":"+old))
		req, _ = http.NewRequest(http.MethodGet, e.ts.URL+"/files?"+q.Encode(), nil)
		if status, _ := do(t, req); status != http.StatusUnauthorized {
			t.Fatalf("expired signature: %d, want 401", status)
		}
	})
}

func TestInitEnvsMetrics(t *testing.T) {
	e := newEnv(t)
	do := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, e.ts.URL+path, bytes.NewReader([]byte(body)))
		req.Header.Set("X-Access-Token", testToken)
		req.Header.Set("Content-Type", "application/json")
		return e.do(t, req)
	}
	if status, b := do(http.MethodPost, "/init", `{"envVars":{"A":"1","B":"2"}}`); status != http.StatusNoContent {
		t.Fatalf("init: %d %s", status, b)
	}
	if _, b := do(http.MethodGet, "/envs", ""); string(bytes.TrimSpace(b)) != `{"A":"1","B":"2"}` {
		t.Fatalf("envs = %s", b)
	}
	if status, _ := do(http.MethodPost, "/init", `{"envVars":{"C":"3"}}`); status != http.StatusNoContent {
		t.Fatal(status)
	}
	if _, b := do(http.MethodGet, "/envs", ""); string(bytes.TrimSpace(b)) != `{"C":"3"}` {
		t.Fatalf("envs after replace = %s", b)
	}
	if status, _ := do(http.MethodPost, "/init", `{"defaultUser":"no-such-user-xyz"}`); status != http.StatusBadRequest {
		t.Fatalf("unknown default user: %d, want 400", status)
	}

	status, b := do(http.MethodGet, "/metrics", "")
	if status != 200 {
		t.Fatalf("metrics: %d", status)
	}
	var m map[string]float64
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ts", "cpu_count", "cpu_used_pct", "mem_total", "mem_used", "mem_cache", "mem_total_mib", "mem_used_mib", "disk_used", "disk_total"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics lack %q: %s", k, b)
		}
	}
	if m["cpu_count"] < 1 || m["mem_total"] <= 0 || m["disk_total"] <= 0 {
		t.Errorf("implausible metrics: %s", b)
	}

	// A new token replaces the old one.
	if status, _ := do(http.MethodPost, "/init", `{"accessToken":"rotated"}`); status != http.StatusNoContent {
		t.Fatal(status)
	}
	if status, _ := do(http.MethodGet, "/envs", ""); status != http.StatusUnauthorized {
		t.Fatalf("old token after rotation: %d, want 401", status)
	}
}

func TestUploadOwnership(t *testing.T) {
	testenv.RequiresRoot(t)
	e := newEnv(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	p := filepath.Join(dir, "sub", "owned.txt")
	req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/files?username=nobody&path="+url.QueryEscape(p), bytes.NewReader([]byte("x")))
	req.Header.Set("X-Access-Token", testToken)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, path := range []string{p, filepath.Dir(p)} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 {
			t.Errorf("%s owned by uid %d, want nobody (65534)", path, st.Uid)
		}
	}
}
