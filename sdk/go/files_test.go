package platinum_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestUploadStreams proves Upload sends the body while it is still being
// produced: the second chunk is only written after the server has received
// the first, which a buffering client would never deliver.
func TestUploadStreams(t *testing.T) {
	_, c, id := withSandbox(t)
	// The sandboxes of platinumtest share the test machine's filesystem:
	// the file's size there is what the sandbox has received.
	file := filepath.Join(t.TempDir(), "big.bin")
	// ptd reads the first MiB of any body before it routes it (a JSON body
	// may carry an idempotency key), so the first chunk is larger.
	first := bytes.Repeat([]byte("a"), 2<<20)
	second := []byte("the end")
	received := make(chan int64, 1)
	go func() {
		for {
			if fi, err := os.Stat(file); err == nil && fi.Size() >= int64(len(first)) {
				received <- fi.Size()
				return
			}
			select {
			case <-t.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

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

	if err := c.Sandboxes.Upload(t.Context(), id, file, pr); err != nil {
		t.Fatal(err)
	}
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(got, append(slices.Clone(first), second...)) {
		t.Errorf("sandbox has %d bytes (%v), want %d", len(got), err, len(first)+len(second))
	}
}

// closeRecorder notes whether Upload closed the caller's reader.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestFiles(t *testing.T) {
	_, c := newServer(t)
	ctx := t.Context()
	id := running(t, c, platinum.CreateSandboxRequest{}).ID
	notRunning := running(t, c, platinum.CreateSandboxRequest{}).ID
	if _, err := c.Sandboxes.Stop(ctx, notRunning, platinum.WaitForStopped(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The sandboxes of platinumtest share the test machine's filesystem.
	work := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}

	r := &closeRecorder{Reader: strings.NewReader("hello")}
	if err := c.Sandboxes.Upload(ctx, id, work+"/a.txt", r); err != nil {
		t.Fatal(err)
	}
	if r.closed {
		t.Error("Upload closed the caller's reader")
	}
	created, err := c.Sandboxes.MakeDir(ctx, id, work+"/sub")
	if err != nil || !created {
		t.Fatalf("MakeDir = %v, %v; want created", created, err)
	}
	if created, err := c.Sandboxes.MakeDir(ctx, id, work+"/sub"); err != nil || created {
		t.Errorf("second MakeDir = %v, %v; want existing", created, err)
	}

	rc, err := c.Sandboxes.Download(ctx, id, work+"/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "hello" {
		t.Errorf("Download = %q, %v", b, err)
	}

	entries, err := c.Sandboxes.ListFiles(ctx, id, work)
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
	want := []string{"a.txt " + work + "/a.txt file -rw-r--r--", "sub " + work + "/sub dir drwxr-xr-x"}
	if !slices.Equal(got, want) {
		t.Errorf("ListFiles = %q, want %q", got, want)
	}

	errTests := []struct {
		name string
		call func(context.Context) error
		want func(error) bool
	}{
		{"download a directory", func(ctx context.Context) error { _, err := c.Sandboxes.Download(ctx, id, work); return err },
			func(err error) bool { return errors.Is(err, platinum.ErrIsDirectory) }},
		{"list a file", func(ctx context.Context) error { _, err := c.Sandboxes.ListFiles(ctx, id, work+"/a.txt"); return err },
			func(err error) bool { return errors.Is(err, platinum.ErrNotDirectory) }},
		{"download missing", func(ctx context.Context) error { _, err := c.Sandboxes.Download(ctx, id, "/nope"); return err },
			platinum.IsNotFound},
		{"dotdot", func(ctx context.Context) error { _, err := c.Sandboxes.ListFiles(ctx, id, work+"/../etc"); return err },
			func(err error) bool { return platinum.IsCode(err, platinum.CodeInvalidRequest) }},
		{"upload to a stopped sandbox", func(ctx context.Context) error {
			return c.Sandboxes.Upload(ctx, notRunning, "/x", strings.NewReader("x"))
		}, func(err error) bool { return platinum.IsCode(err, platinum.CodeSandboxNotReady) }},
		{"remove recursively", func(ctx context.Context) error { return c.Sandboxes.RemoveFile(ctx, id, work) },
			func(err error) bool { return err == nil }},
		{"then it is gone", func(ctx context.Context) error { _, err := c.Sandboxes.ListFiles(ctx, id, work); return err },
			platinum.IsNotFound},
		{"remove missing", func(ctx context.Context) error { return c.Sandboxes.RemoveFile(ctx, id, work) },
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
