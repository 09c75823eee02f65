package ptdtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestBody(t *testing.T) {
	for _, tc := range []struct {
		name       string
		body       any
		raw, jsonB string // what Body and JSONBody send ("-" for no body)
	}{
		{"nil", nil, "-", "-"},
		{"string", `{"a":1}`, `{"a":1}`, `"{\"a\":1}"`},
		{"bytes", []byte("x"), "x", `"eA=="`},
		{"reader", strings.NewReader("r"), "r", "{}"},
		{"map", map[string]any{"a": 1}, `{"a":1}`, `{"a":1}`},
	} {
		for _, f := range []struct {
			fn   func(any) io.Reader
			want string
		}{{Body, tc.raw}, {JSONBody, tc.jsonB}} {
			got := "-"
			if r := f.fn(tc.body); r != nil {
				b, _ := io.ReadAll(r)
				got = string(b)
			}
			if got != f.want {
				t.Errorf("%s: got %q, want %q", tc.name, got, f.want)
			}
		}
	}
}

func TestSend(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen", r.Method)
		w.WriteHeader(201)
		io.WriteString(w, `[{"id":"a"}]`)
	}))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL, nil)
	r, err := Send(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 201 || r.Header.Get("X-Seen") != "POST" || len(r.List()) != 1 || r.List()[0]["id"] != "a" || r.JSON() != nil {
		t.Errorf("got %d %v %s", r.Status, r.Header, r.Body)
	}
}
