package ptdtest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPanicOrTail: a log with a panic is shown from the panic's line, one
// without by its tail.
func TestPanicOrTail(t *testing.T) {
	for _, tc := range []struct{ log, want string }{
		{"a\nb\nc\nd", "c\nd"},
		{"a\nb\n2026/12/05 http: panic serving 1.2.3.4: boom\ngoroutine 1\nx\ny", "2026/12/05 http: panic serving 1.2.3.4: boom\ngoroutine 1"},
		{"a\npanic: boom\n\ngoroutine 1", "panic: boom\n"},
	} {
		if got := PanicOrTail(tc.log, 2); got != tc.want {
			t.Errorf("PanicOrTail(%q) = %q, want %q", tc.log, got, tc.want)
		}
	}
}

// TestCheckOwnPort: a ptd that answers health but refuses this daemon's
// token is another test's on the same port: the start is retried on new
// ports (the error says "address already in use"); one that takes the
// token is this one.
func TestCheckOwnPort(t *testing.T) {
	for _, tc := range []struct {
		status  int
		wantErr bool
	}{{200, false}, {401, true}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer mine" {
				t.Errorf("asked with %q", r.Header.Get("Authorization"))
			}
			w.WriteHeader(tc.status)
		}))
		t.Cleanup(srv.Close)
		exited := make(chan struct{})
		close(exited) // this ptd already exited on its bind
		d := &Daemon{URL: srv.URL, Token: "mine", BinDir: t.TempDir()}
		err := d.checkOwnPort(exited)
		if (err != nil) != tc.wantErr || (err != nil && !strings.Contains(err.Error(), "address already in use")) {
			t.Errorf("answer %d: err %v, want an error %v", tc.status, err, tc.wantErr)
		}
	}
}
