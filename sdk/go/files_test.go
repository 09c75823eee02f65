package platinum_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

// TestUploadStreams proves Upload sends the body while it is still being
// produced: the second chunk is only written after the server has received
// the first, which a buffering client would never deliver.
func TestUploadStreams(t *testing.T) {
	srv, c := newFake(t)
	id := srv.AddSandbox(platinumtest.Sandbox{})
	first := bytes.Repeat([]byte("a"), 100<<10)
	second := []byte("the end")
	received := make(chan int64, 100)
	srv.OnUploadRead = func(total int64) {
		select {
		case received <- total:
		default:
		}
	}

	pr, pw := io.Pipe()
	writerDone := make(chan error, 1)
	go func() {
		if _, err := pw.Write(first); err != nil {
			writerDone <- err
			return
		}
		// Generous bound so a broken client fails instead of hanging the suite.
		deadline := time.After(time.Minute)
		for {
			select {
			case n := <-received:
				if n < int64(len(first)) {
					continue
				}
			case <-deadline:
				err := errors.New("server did not receive the first chunk before the body ended: Upload buffers")
				pw.CloseWithError(err)
				writerDone <- err
				return
			}
			break
		}
		_, err := pw.Write(second)
		pw.Close()
		writerDone <- err
	}()

	if err := c.Sandboxes.Upload(t.Context(), id, "/data/big.bin", pr); err != nil {
		t.Fatal(err)
	}
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	got, ok := srv.File(id, "/data/big.bin")
	if !ok || !bytes.Equal(got, append(slices.Clone(first), second...)) {
		t.Errorf("server has %d bytes, want %d", len(got), len(first)+len(second))
	}
	up := srv.LastUpload()
	if up.ContentLength != -1 || !slices.Contains(up.TransferEncoding, "chunked") {
		t.Errorf("upload arrived with Content-Length %d, Transfer-Encoding %q; want chunked", up.ContentLength, up.TransferEncoding)
	}
}

// closeRecorder notes whether Upload closed the caller's reader.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestFiles(t *testing.T) {
	srv, c := newFake(t)
	ctx := t.Context()
	id := srv.AddSandbox(platinumtest.Sandbox{})
	notRunning := srv.AddSandbox(platinumtest.Sandbox{State: "stopped"})

	r := &closeRecorder{Reader: strings.NewReader("hello")}
	if err := c.Sandboxes.Upload(ctx, id, "/work/a.txt", r); err != nil {
		t.Fatal(err)
	}
	if r.closed {
		t.Error("Upload closed the caller's reader")
	}
	created, err := c.Sandboxes.MakeDir(ctx, id, "/work/sub")
	if err != nil || !created {
		t.Fatalf("MakeDir = %v, %v; want created", created, err)
	}
	if created, err := c.Sandboxes.MakeDir(ctx, id, "/work/sub"); err != nil || created {
		t.Errorf("second MakeDir = %v, %v; want existing", created, err)
	}

	rc, err := c.Sandboxes.Download(ctx, id, "/work/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "hello" {
		t.Errorf("Download = %q, %v", b, err)
	}

	entries, err := c.Sandboxes.ListFiles(ctx, id, "/work")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name+" "+e.Path+" "+e.Type+" "+e.Mode)
		if e.ModifiedAt.IsZero() {
			t.Errorf("entry %s has no modified_at", e.Name)
		}
	}
	want := []string{"a.txt /work/a.txt file -rw-r--r--", "sub /work/sub dir drwxr-xr-x"}
	if !slices.Equal(got, want) {
		t.Errorf("ListFiles = %q, want %q", got, want)
	}

	errTests := []struct {
		name string
		call func(context.Context) error
		want func(error) bool
	}{
		{"download a directory", func(ctx context.Context) error { _, err := c.Sandboxes.Download(ctx, id, "/work"); return err },
			func(err error) bool { return errors.Is(err, platinum.ErrIsDirectory) }},
		{"list a file", func(ctx context.Context) error { _, err := c.Sandboxes.ListFiles(ctx, id, "/work/a.txt"); return err },
			func(err error) bool { return errors.Is(err, platinum.ErrNotDirectory) }},
		{"download missing", func(ctx context.Context) error { _, err := c.Sandboxes.Download(ctx, id, "/nope"); return err },
			platinum.IsNotFound},
		{"dotdot", func(ctx context.Context) error { _, err := c.Sandboxes.ListFiles(ctx, id, "/work/../etc"); return err },
			func(err error) bool { return platinum.IsCode(err, platinum.CodeInvalidRequest) }},
		{"upload to a stopped sandbox", func(ctx context.Context) error {
			return c.Sandboxes.Upload(ctx, notRunning, "/x", strings.NewReader("x"))
		}, func(err error) bool { return platinum.IsCode(err, platinum.CodeSandboxNotReady) }},
		{"remove recursively", func(ctx context.Context) error { return c.Sandboxes.RemoveFile(ctx, id, "/work") },
			func(err error) bool { return err == nil }},
		{"then it is gone", func(ctx context.Context) error { _, err := c.Sandboxes.ListFiles(ctx, id, "/work"); return err },
			platinum.IsNotFound},
		{"remove missing", func(ctx context.Context) error { return c.Sandboxes.RemoveFile(ctx, id, "/work") },
			platinum.IsNotFound},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(t.Context()); !tt.want(err) {
				t.Errorf("err = %v", err)
			}
		})
	}
}
