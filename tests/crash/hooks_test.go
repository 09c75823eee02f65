package crash

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/crashpoint"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// startDaemon starts a ptd for one test (stopped and reset in t.Cleanup).
func startDaemon(t *testing.T, extra ...string) (*ptdtest.Daemon, *api) {
	t.Helper()
	testenv.RequiresRoot(t)
	d := ptdtest.StartTest(t, ptdtest.Options{Keep: os.Getenv("PT_E2E_KEEP") != "", ExtraArgs: extra}, 60)
	return d, &api{t: t, d: d}
}

// armCrash restarts ptd so that it kills itself at step.
func armCrash(t *testing.T, d *ptdtest.Daemon, step string) {
	t.Helper()
	d.Kill()
	d.Env = []string{crashpoint.Env + "=" + step}
	if err := d.Restart(); err != nil {
		t.Fatalf("restart armed at %s: %v", step, err)
	}
}

// crashed waits for ptd to reach its crashpoint and die, then restarts it
// without one.
func crashed(t *testing.T, d *ptdtest.Daemon, step string) {
	t.Helper()
	if !d.WaitExit(90 * time.Second) {
		t.Fatalf("ptd never reached crashpoint %s", step)
	}
	d.Env = nil
	if err := d.Restart(); err != nil {
		t.Fatalf("restart after crash at %s: %v", step, err)
	}
}

// try is do that reports a transport error (ptd dying mid-request)
// instead of failing the test.
func (a *api) try(method, path string, body any, header map[string]string) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.d.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+a.d.Token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m, nil
}

// eventually polls f every 100 ms until it returns "" or d passes, then
// fails with f's last complaint.
func eventually(t *testing.T, d time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
