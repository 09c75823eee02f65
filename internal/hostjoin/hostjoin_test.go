package hostjoin

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const token = "0123456789abcdef0123456789abcdef"

var info = Info{Region: "eu", SecretsKey: []byte("k1"), PreviewKey: []byte("k2"),
	Objects: Objects{Endpoint: "http://127.0.0.1:9000", AccessKey: "a", SecretKey: "s", Bucket: "b"}}

func TestFetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(Path, Handler(info, Authorizer(token)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name, url, token string
		want             string // "" for success, else a part of the error
	}{
		{"the token", srv.URL, token, ""},
		{"a trailing slash", srv.URL + "/", token, ""},
		{"a wrong token", srv.URL, strings.Repeat("x", 32), "refused the host token"},
		{"no token", srv.URL, "", "refused the host token"},
		{"a prefix of the token", srv.URL, token[:31], "refused the host token"},
		{"a ptd serving no hosts", srv.URL + "/elsewhere", token, "serves no hosts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := Fetch(ctx, tc.url, tc.token, log)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(info, got); d != "" {
					t.Fatalf("info (-want +got):\n%s", d)
				}
				return
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrRefused saying %q", err, tc.want)
			}
		})
	}
}

// A host may start before the platform's ptd: Fetch waits for it.
func TestFetchWaitsForThePlatform(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers there yet
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	_, err = Fetch(ctx, "http://"+addr, token, log)
	cancel()
	if err == nil || errors.Is(err, ErrRefused) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("nothing listening: %v, want the context's end (not a refusal)", err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := Fetch(context.Background(), "http://"+addr, token, log)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	srv := &http.Server{Handler: Handler(info, Authorizer(token))}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	if err := <-done; err != nil {
		t.Fatalf("after the platform came up: %v", err)
	}
}

func TestCheckToken(t *testing.T) {
	if CheckToken(token) != nil || CheckToken(token[:31]) == nil || CheckToken("") == nil {
		t.Fatal("CheckToken takes 32 characters and more only")
	}
}
