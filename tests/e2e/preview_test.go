package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"
)

// The preview tests run previewsrv (testdata/previewsrv, static Go)
// inside sandboxes and reach it through ptd's preview proxy with real
// clients: Go's net/http (HTTP/1.1 and h2c), curl, and a WebSocket client.

const previewPort = 8080

var previewSrv struct {
	once sync.Once
	path string
	err  error
}

// previewSrvBinary builds testdata/previewsrv once per run.
func previewSrvBinary(t *testing.T) string {
	t.Helper()
	previewSrv.once.Do(func() {
		dir, err := os.MkdirTemp("", "pt-previewsrv-")
		if err != nil {
			previewSrv.err = err
			return
		}
		previewSrv.path = filepath.Join(dir, "previewsrv")
		cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", previewSrv.path, "./testdata/previewsrv")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			previewSrv.err = fmt.Errorf("build previewsrv: %v\n%s", err, out)
		}
	})
	if previewSrv.err != nil {
		t.Fatal(previewSrv.err)
	}
	return previewSrv.path
}

// startPreviewSrv copies previewsrv into the sandbox (first call) and
// runs it in the background on previewPort, returning once it answers.
func startPreviewSrv(t *testing.T, c *client, id string, upload bool) {
	t.Helper()
	if upload {
		b, err := os.ReadFile(previewSrvBinary(t))
		if err != nil {
			t.Fatal(err)
		}
		if r := c.do("PUT", "/v1/sandboxes/"+id+"/files?path=/root/previewsrv", b); r.Status/100 != 2 {
			t.Fatalf("upload previewsrv: %d %s", r.Status, r.Body)
		}
		c.mustSh(id, "chmod +x /root/previewsrv")
	}
	c.mustSh(id, fmt.Sprintf(`(/root/previewsrv -listen :%d </dev/null >/tmp/previewsrv.log 2>&1 &)
for i in $(seq 100); do wget -q -O /dev/null http://127.0.0.1:%d/hello && exit 0; sleep 0.05; done; cat /tmp/previewsrv.log; exit 1`, previewPort, previewPort))
}

type previewURLs struct {
	SandboxID  string  `json:"sandbox_id"`
	Port       int     `json:"port"`
	URL        string  `json:"url"`
	PathURL    string  `json:"path_url"`
	BrowserURL string  `json:"browser_url"`
	Token      string  `json:"token"`
	Public     bool    `json:"public"`
	ExpiresAt  *string `json:"expires_at"`
}

func getPreview(t *testing.T, c *client, id string, port int, query string) previewURLs {
	t.Helper()
	r := c.do("GET", fmt.Sprintf("/v1/sandboxes/%s/preview-urls/%d%s", id, port, query), nil)
	if r.Status != 200 {
		t.Fatalf("preview-urls: %d %s", r.Status, r.Body)
	}
	var u previewURLs
	if err := json.Unmarshal(r.Body, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// previewClient dials the preview listener whatever the URL's host says:
// *.localhost names never go to a resolver.
func previewClient(h2c bool) *http.Client {
	addr := strings.TrimPrefix(env.previewURL, "http://")
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		DisableCompression: true,
	}
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type presp struct {
	status int
	header http.Header
	body   string
	proto  int
}

func pdo(t *testing.T, hc *http.Client, method, url string, body io.Reader, hdr map[string]string) presp {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return presp{resp.StatusCode, resp.Header, string(b), resp.ProtoMajor}
}

func curl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS", "--max-time", "60"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestPreviewProxy(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	startPreviewSrv(t, c, id, true)
	u := getPreview(t, c, id, previewPort, "")
	label := fmt.Sprintf("%d-%s", previewPort, strings.ToLower(strings.Replace(id, "_", "", 1)))
	if !strings.HasPrefix(u.URL, "http://"+label+".localhost:") || !strings.Contains(u.PathURL, "/"+id+"/8080/") ||
		u.Token == "" || u.Public || u.ExpiresAt != nil || u.BrowserURL != u.URL+"?pt_token="+u.Token {
		t.Fatalf("preview URLs: %+v", u)
	}
	hc := previewClient(false)
	auth := map[string]string{"X-Pt-Preview-Token": u.Token}

	t.Run("go client, host and path forms", func(t *testing.T) {
		r := pdo(t, hc, "GET", u.URL+"hello?x=1", nil, auth)
		if r.status != 200 || !strings.HasPrefix(r.body, "hello from GET /hello?x=1") || !strings.Contains(r.body, `token=""`) {
			t.Errorf("host form: %d %s", r.status, r.body)
		}
		r = pdo(t, hc, "GET", u.PathURL+"hello", nil, auth)
		if r.status != 200 || !strings.HasPrefix(r.body, "hello from GET /hello ") {
			t.Errorf("path form: %d %s", r.status, r.body)
		}
	})

	t.Run("curl, Host header, path form and browser cookie", func(t *testing.T) {
		out := curl(t, "-H", "Host: "+label+".localhost", "-H", "X-Pt-Preview-Token: "+u.Token, env.previewURL+"/hello")
		if !strings.HasPrefix(out, "hello from GET /hello ") {
			t.Errorf("curl Host: %s", out)
		}
		out = curl(t, "-H", "X-Pt-Preview-Token: "+u.Token, fmt.Sprintf("%s/%s/%d/hello", env.previewURL, id, previewPort))
		if !strings.HasPrefix(out, "hello from GET /hello ") {
			t.Errorf("curl path form: %s", out)
		}
		// A browser link: ?pt_token= becomes a cookie and a redirect to
		// the clean URL, which the cookie then opens.
		jar := filepath.Join(t.TempDir(), "jar")
		out = curl(t, "-L", "-c", jar, "-b", jar, fmt.Sprintf("%s/%s/%d/hello?pt_token=%s", env.previewURL, id, previewPort, u.Token))
		if !strings.HasPrefix(out, "hello from GET /hello ") || strings.Contains(out, u.Token) {
			t.Errorf("curl browser flow: %s", out)
		}
		out = curl(t, "-b", jar, fmt.Sprintf("%s/%s/%d/hello", env.previewURL, id, previewPort))
		if !strings.HasPrefix(out, "hello from GET /hello ") {
			t.Errorf("curl with cookie only: %s", out)
		}
	})

	t.Run("h2c", func(t *testing.T) {
		r := pdo(t, previewClient(true), "GET", u.URL+"hello", nil, auth)
		if r.status != 200 || r.proto != 2 || !strings.HasPrefix(r.body, "hello from GET /hello") {
			t.Errorf("h2c: %d HTTP/%d %s", r.status, r.proto, r.body)
		}
		out := curl(t, "--http2-prior-knowledge", "-w", " %{http_version}", "-H", "X-Pt-Preview-Token: "+u.Token,
			fmt.Sprintf("%s/%s/%d/hello", env.previewURL, id, previewPort))
		if !strings.HasPrefix(out, "hello from GET /hello") || !strings.HasSuffix(out, " 2") {
			t.Errorf("curl h2c: %s", out)
		}
	})

	t.Run("denials look alike", func(t *testing.T) {
		ghost := "sbx_01KZZZZZZZZZZZZZZZZZZZZZZZ"
		ghostURL := strings.Replace(u.URL, label, fmt.Sprintf("%d-%s", previewPort, strings.ToLower(strings.Replace(ghost, "_", "", 1))), 1)
		want := pdo(t, hc, "GET", ghostURL+"hello", nil, auth)
		if want.status != 401 {
			t.Fatalf("unknown sandbox: %d %s", want.status, want.body)
		}
		short := getPreview(t, c, id, previewPort, "?expires_in_seconds=1")
		if short.ExpiresAt == nil {
			t.Fatalf("expiring URL has no expires_at: %+v", short)
		}
		other := getPreview(t, c, id, previewPort+1, "")
		sleep(2100) // let the short token expire
		cases := map[string]map[string]string{
			"missing":    nil,
			"bad":        {"X-Pt-Preview-Token": "pv1.bad.bad"},
			"expired":    {"X-Pt-Preview-Token": short.Token},
			"other port": {"X-Pt-Preview-Token": other.Token},
		}
		for name, hdr := range cases {
			for _, url := range []string{u.URL + "hello", u.PathURL + "hello"} {
				got := pdo(t, hc, "GET", url, nil, hdr)
				if got.status != want.status || got.body != want.body || got.header.Get("Content-Type") != want.header.Get("Content-Type") {
					t.Errorf("%s (%s): %d %s; want what an unknown sandbox gets: %d %s", name, url, got.status, got.body, want.status, want.body)
				}
			}
		}
		// Revoked: the old token stops working, a new one works.
		if r := c.do("DELETE", fmt.Sprintf("/v1/sandboxes/%s/preview-urls/%d", id, previewPort), nil); r.Status != 204 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		if got := pdo(t, hc, "GET", u.URL+"hello", nil, auth); got.status != want.status || got.body != want.body {
			t.Errorf("revoked token: %d %s", got.status, got.body)
		}
		fresh := getPreview(t, c, id, previewPort, "")
		if fresh.Token == u.Token {
			t.Fatalf("a revoked port handed out the same token")
		}
		if got := pdo(t, hc, "GET", u.URL+"hello", nil, map[string]string{"X-Pt-Preview-Token": fresh.Token}); got.status != 200 {
			t.Errorf("new token after revoke: %d %s", got.status, got.body)
		}
		auth["X-Pt-Preview-Token"] = fresh.Token
		// Another org's sandbox is 404 on the API.
		if r := c.do("GET", "/v1/sandboxes/"+ghost+"/preview-urls/8080", nil); r.Status != 404 {
			t.Errorf("preview-urls of an unknown sandbox: %d %s", r.Status, r.Body)
		}
		for _, bad := range []string{"0", "65536", "x", "49983"} {
			if r := c.do("GET", "/v1/sandboxes/"+id+"/preview-urls/"+bad, nil); r.Status != 400 {
				t.Errorf("port %s: %d %s", bad, r.Status, r.Body)
			}
		}
		if r := c.do("GET", "/v1/sandboxes/"+id+"/preview-urls/8080?expires_in_seconds=-1", nil); r.Status != 400 {
			t.Errorf("negative expiry: %d %s", r.Status, r.Body)
		}
	})

	t.Run("public port", func(t *testing.T) {
		r := c.do("POST", fmt.Sprintf("/v1/sandboxes/%s/preview-urls/%d", id, previewPort), map[string]any{"public": true})
		if r.Status != 200 || r.JSON()["public"] != true {
			t.Fatalf("make public: %d %s", r.Status, r.Body)
		}
		if got := pdo(t, hc, "GET", u.URL+"hello", nil, nil); got.status != 200 {
			t.Errorf("public port without token: %d %s", got.status, got.body)
		}
		if out := curl(t, fmt.Sprintf("%s/%s/%d/hello", env.previewURL, id, previewPort)); !strings.HasPrefix(out, "hello from") {
			t.Errorf("curl public: %s", out)
		}
		r = c.do("POST", fmt.Sprintf("/v1/sandboxes/%s/preview-urls/%d", id, previewPort), map[string]any{"public": false})
		if r.Status != 200 || r.JSON()["public"] != false {
			t.Fatalf("make private: %d %s", r.Status, r.Body)
		}
		if got := pdo(t, hc, "GET", u.URL+"hello", nil, nil); got.status != 401 {
			t.Errorf("private again without token: %d %s", got.status, got.body)
		}
	})

	t.Run("pt sandbox preview", func(t *testing.T) {
		out, errOut, code := pt(t, nil, "sandbox", "preview", id, "8080", "--expires", "1h", "--json")
		var got previewURLs
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.ExpiresAt == nil || got.Token == "" || got.URL != u.URL {
			t.Fatalf("pt sandbox preview --json: %d %s %s", code, out, errOut)
		}
		if r := pdo(t, hc, "GET", got.URL+"hello", nil, map[string]string{"X-Pt-Preview-Token": got.Token}); r.status != 200 {
			t.Errorf("token from the CLI: %d %s", r.status, r.body)
		}
		out, errOut, code = pt(t, nil, "sandbox", "preview", id, "8081", "--public")
		if code != 0 || !strings.Contains(out, "public:       true") || !strings.Contains(out, "url:") {
			t.Errorf("pt sandbox preview --public: %d %s %s", code, out, errOut)
		}
		if _, errOut, code := pt(t, nil, "sandbox", "preview", id, "nope"); code == 0 || !strings.Contains(errOut, "PORT") {
			t.Errorf("bad port: %d %s", code, errOut)
		}
	})

	t.Run("websocket echo", func(t *testing.T) {
		for _, form := range []struct{ host, path string }{
			{label + ".localhost", "/ws"},
			{"localhost", "/" + id + "/8080/ws"},
		} {
			ws := dialWS(t, form.host, form.path, auth["X-Pt-Preview-Token"])
			for i, msg := range []string{"hello", strings.Repeat("x", 200), strings.Repeat("y", 70000)} {
				ws.write(t, msg)
				if got := ws.read(t); got != msg {
					t.Fatalf("%s echo %d: got %d bytes, want %d", form.path, i, len(got), len(msg))
				}
			}
			ws.conn.Close()
		}
	})

	t.Run("streaming arrives incrementally", func(t *testing.T) {
		req, _ := http.NewRequest("GET", u.URL+"stream?n=4&ms=400", nil)
		req.Header.Set("X-Pt-Preview-Token", auth["X-Pt-Preview-Token"])
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var got []time.Time // when each event arrived here
		var sent []int64    // when the sandbox wrote it
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				break
			}
			var i int
			var ns int64
			if _, err := fmt.Sscanf(line, "data: %d %d", &i, &ns); err == nil {
				got, sent = append(got, time.Now()), append(sent, ns)
			}
		}
		if len(got) != 4 {
			t.Fatalf("got %d events", len(got))
		}
		// The first event reached us before the sandbox wrote the last:
		// the proxy did not hold the response back (one clock: the
		// sandbox shares the host's kernel).
		if !got[0].Before(time.Unix(0, sent[3])) {
			t.Errorf("first event arrived at %v, after the last was written at %v: buffered", got[0], time.Unix(0, sent[3]))
		}
	})

	t.Run("100 MB upload and download stream", func(t *testing.T) {
		const size = 100 << 20
		h := sha256.New()
		pr, pw := io.Pipe()
		go func() {
			buf := make([]byte, 1<<20)
			rand.Read(buf)
			for n := 0; n < size; n += len(buf) {
				h.Write(buf)
				if _, err := pw.Write(buf); err != nil {
					return
				}
			}
			pw.Close()
		}()
		r := pdo(t, hc, "POST", u.URL+"upload", pr, auth) // chunked: length unknown
		want := fmt.Sprintf("%d %s", size, hex.EncodeToString(h.Sum(nil)))
		if r.status != 200 || r.body != want {
			t.Errorf("upload: %d %q, want %q", r.status, r.body, want)
		}
		req, _ := http.NewRequest("GET", u.URL+"download?n="+strconv.Itoa(size), nil)
		req.Header.Set("X-Pt-Preview-Token", auth["X-Pt-Preview-Token"])
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != size || resp.ContentLength != size {
			t.Errorf("download: %d bytes (Content-Length %d), %v", n, resp.ContentLength, err)
		}
	})
}

// wsConn is a minimal RFC 6455 client: enough to check that a WebSocket
// passes through the proxy both ways.
type wsConn struct {
	conn net.Conn
	br   *bufio.Reader
}

func dialWS(t *testing.T, host, path, token string) *wsConn {
	t.Helper()
	return dialWSAt(t, env.previewURL, host, path, token)
}

// dialWSAt is dialWS to the preview listener at previewURL.
func dialWSAt(t *testing.T, previewURL, host, path, token string) *wsConn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(previewURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 16)
	rand.Read(key)
	k64 := base64.StdEncoding.EncodeToString(key)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nX-Pt-Preview-Token: %s\r\n\r\n",
		path, host, k64, token)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum([]byte(k64 + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
		t.Fatalf("websocket handshake %s: %d %v %s", path, resp.StatusCode, resp.Header, b)
	}
	return &wsConn{conn: conn, br: br}
}

func (w *wsConn) write(t *testing.T, msg string) {
	t.Helper()
	var b bytes.Buffer
	b.WriteByte(0x81)
	switch n := len(msg); {
	case n < 126:
		b.WriteByte(0x80 | byte(n))
	case n < 1<<16:
		b.WriteByte(0x80 | 126)
		binary.Write(&b, binary.BigEndian, uint16(n))
	default:
		b.WriteByte(0x80 | 127)
		binary.Write(&b, binary.BigEndian, uint64(n))
	}
	mask := make([]byte, 4)
	rand.Read(mask)
	b.Write(mask)
	for i := range len(msg) {
		b.WriteByte(msg[i] ^ mask[i%4])
	}
	if _, err := w.conn.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
}

func (w *wsConn) read(t *testing.T) string {
	t.Helper()
	w.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var h [2]byte
	if _, err := io.ReadFull(w.br, h[:]); err != nil {
		t.Fatal(err)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		io.ReadFull(w.br, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		io.ReadFull(w.br, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(w.br, p); err != nil {
		t.Fatal(err)
	}
	return string(p)
}

// startEvents counts the sandbox's state changes into starting or
// restoring, read from ptd's store (read-only).
func startEvents(t *testing.T, id string) int {
	t.Helper()
	var n int
	if env.storeURL != "" {
		conn, err := pgx.Connect(t.Context(), env.storeURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM events WHERE sandbox_id = $1 AND type = 'state_changed'
			AND data->>'to' IN ('starting', 'restoring')`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(env.dataDir, "platinum.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.QueryRow(`SELECT count(*) FROM events WHERE sandbox_id = ? AND type = 'state_changed'
		AND json_extract(data, '$.to') IN ('starting', 'restoring')`, id).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func sandboxState(t *testing.T, c *client, id string) map[string]any {
	t.Helper()
	r := c.do("GET", "/v1/sandboxes/"+id, nil)
	if r.Status != 200 {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	return r.JSON()
}

func TestPreviewAutoResume(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	startPreviewSrv(t, c, id, true)
	u := getPreview(t, c, id, previewPort, "")
	hc := previewClient(false)
	auth := map[string]string{"X-Pt-Preview-Token": u.Token}
	stop := func(query string) {
		t.Helper()
		if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped"+query, nil); r.Status != 200 || r.JSON()["state"] != "stopped" {
			t.Fatalf("stop: %d %s", r.Status, r.Body)
		}
	}

	t.Run("a failed check never starts it", func(t *testing.T) {
		stop("")
		before := startEvents(t, id)
		if r := pdo(t, hc, "GET", u.URL+"hello", nil, map[string]string{"X-Pt-Preview-Token": "pv1.x.y"}); r.status != 401 {
			t.Errorf("bad token: %d %s", r.status, r.body)
		}
		if r := pdo(t, hc, "GET", u.URL+"hello", nil, nil); r.status != 401 {
			t.Errorf("no token: %d %s", r.status, r.body)
		}
		if n := startEvents(t, id); n != before || sandboxState(t, c, id)["state"] != "stopped" {
			t.Errorf("a denied request started the sandbox (%d → %d starts)", before, n)
		}
	})

	t.Run("warm-stopped, concurrent requests, one start", func(t *testing.T) {
		before := startEvents(t, id)
		var wg sync.WaitGroup
		res := make([]presp, 8)
		for i := range res {
			wg.Go(func() {
				res[i] = pdo(t, hc, "GET", u.URL+"hello", nil, auth)
			})
		}
		wg.Wait()
		for i, r := range res {
			if r.status != 200 || !strings.HasPrefix(r.body, "hello from GET /hello") {
				t.Errorf("request %d: %d %s", i, r.status, r.body)
			}
		}
		if n := startEvents(t, id) - before; n != 1 {
			t.Errorf("8 concurrent requests made %d starts, want 1", n)
		}
		m := sandboxState(t, c, id)
		if m["state"] != "running" || m["restore"] != "memory" {
			t.Errorf("after auto-resume: state %v restore %v", m["state"], m["restore"])
		}
	})

	// After a cold boot the server is gone until something starts it
	// again: the proxy starts the sandbox and waits for the port, while
	// this restarts the server once the sandbox runs.
	restartSrvWhenRunning := func() (wait func()) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 2400 {
				if apiNoFatal("GET", "/v1/sandboxes/"+id, "")["state"] == "running" {
					apiNoFatal("POST", "/v1/sandboxes/"+id+"/exec", fmt.Sprintf(`{"cmd": "(/root/previewsrv -listen :%d </dev/null >/tmp/previewsrv.log 2>&1 &)"}`, previewPort))
					return
				}
				sleep(50)
			}
		}()
		return func() { <-done }
	}

	t.Run("disk-only stopped: waits for the port", func(t *testing.T) {
		stop("&memory=false")
		defer restartSrvWhenRunning()()
		r := pdo(t, hc, "GET", u.PathURL+"hello", nil, auth)
		if r.status != 200 || !strings.HasPrefix(r.body, "hello from GET /hello") {
			t.Errorf("disk-only auto-resume: %d %s", r.status, r.body)
		}
		if m := sandboxState(t, c, id); m["state"] != "running" || m["restore"] != "disk_only" {
			t.Errorf("after auto-resume: state %v restore %v", m["state"], m["restore"])
		}
	})

	t.Run("archived: unarchived, then forwarded", func(t *testing.T) {
		stop("")
		if r := c.do("POST", "/v1/sandboxes/"+id+"/archive?wait_for_state=archived&wait_timeout_ms=120000", nil); r.Status != 200 || r.JSON()["state"] != "archived" {
			t.Fatalf("archive: %d %s", r.Status, r.Body)
		}
		defer restartSrvWhenRunning()()
		r := pdo(t, hc, "GET", u.URL+"hello", nil, auth)
		if r.status != 200 || !strings.HasPrefix(r.body, "hello from GET /hello") {
			t.Errorf("auto-resume from archived: %d %s", r.status, r.body)
		}
		if m := sandboxState(t, c, id); m["state"] != "running" {
			t.Errorf("after auto-resume from archived: state %v", m["state"])
		}
	})

	t.Run("auto_resume false", func(t *testing.T) {
		if r := c.do("PATCH", "/v1/sandboxes/"+id, map[string]any{"auto_resume": false}); r.Status != 200 {
			t.Fatalf("patch: %d %s", r.Status, r.Body)
		}
		stop("")
		before := startEvents(t, id)
		r := pdo(t, hc, "GET", u.URL+"hello", nil, auth)
		var body map[string]any
		json.Unmarshal([]byte(r.body), &body)
		if r.status != 404 || r.header.Get("X-Pt-Reason") != "auto-resume-disabled" || body["reason"] != "auto-resume-disabled" {
			t.Errorf("auto_resume false: %d %v %s", r.status, r.header, r.body)
		}
		if n := startEvents(t, id); n != before || sandboxState(t, c, id)["state"] != "stopped" {
			t.Errorf("auto_resume false: the request started the sandbox")
		}
		// Only start brings it back.
		if r := c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil); r.Status != 200 {
			t.Fatalf("start: %d %s", r.Status, r.Body)
		}
		if r := pdo(t, hc, "GET", u.URL+"hello", nil, auth); r.status != 200 {
			t.Errorf("after start: %d %s", r.status, r.body)
		}
	})
}

// apiNoFatal calls the API from a helper goroutine (no t.Fatal there).
func apiNoFatal(method, path, body string) map[string]any {
	req, err := http.NewRequest(method, env.url+path, strings.NewReader(body))
	if err != nil {
		return nil
	}
	req.Header.Set("Authorization", "Bearer "+env.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return m
}
