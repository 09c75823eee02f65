package e2e

import (
	"net"
	"net/http"
	"testing"
	"time"
)

func sleep(ms int) { time.Sleep(time.Duration(ms) * time.Millisecond) }

// ensureTemplate builds slug if it has no ready version and waits for it.
func ensureTemplate(t *testing.T, c *client, slug string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Minute)
	for time.Now().Before(deadline) {
		r := c.do("GET", "/v1/templates/"+slug, nil)
		switch r.JSON()["status"] {
		case "ready":
			return
		case "not_built", "failed":
			c.do("POST", "/v1/templates/"+slug+"/build", nil)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("template %s never became ready", slug)
}

// statusOf sends req and returns the answer's status (its body is
// dropped); a transport error fails the test.
func statusOf(t *testing.T, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// dialWithin dials addr until it accepts or d has passed: a server just
// started in the background inside a sandbox listens a moment later, and
// later still on a loaded machine.
func dialWithin(addr string, d time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(d)
	for {
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil || time.Now().After(deadline) {
			return conn, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
