package main

import (
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pkg/sftp"
)

// TestSFTPServer drives `pt-agent sftp-server` with the sftp client over a
// pair of pipes, as the SSH gateway's channel does: uploads, downloads,
// listings, mkdir, rename and remove act on the server's filesystem, and
// relative paths resolve against its working directory.
func TestSFTPServer(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cr, sw := io.Pipe() // server -> client
	sr, cw := io.Pipe() // client -> server
	done := make(chan error, 1)
	go func() { done <- sftpServer(nil, sr, sw) }()
	cl, err := sftp.NewClientPipe(cr, cw)
	if err != nil {
		t.Fatal(err)
	}

	if wd, err := cl.Getwd(); err != nil || wd != dir {
		t.Fatalf("getwd %q %v, want %q", wd, err, dir)
	}
	f, err := cl.Create("up.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("payload\n")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, err := os.ReadFile(filepath.Join(dir, "up.txt")); err != nil || string(b) != "payload\n" {
		t.Fatalf("uploaded file on the server: %q %v", b, err)
	}
	if err := cl.Mkdir("sub"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Rename("up.txt", "sub/moved.txt"); err != nil {
		t.Fatal(err)
	}
	r, err := cl.Open(filepath.Join(dir, "sub/moved.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r); err != nil || string(b) != "payload\n" {
		t.Fatalf("download: %q %v", b, err)
	}
	r.Close()
	ls, err := cl.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range ls {
		names = append(names, fi.Name())
	}
	sort.Strings(names)
	if d := cmp.Diff([]string{"sub"}, names); d != "" {
		t.Errorf("listing (-want +got):\n%s", d)
	}
	if err := cl.Remove("sub/moved.txt"); err != nil {
		t.Fatal(err)
	}
	if err := cl.RemoveDirectory("sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Fatalf("sub after rmdir: %v", err)
	}
	if _, err := cl.Stat("nope"); !os.IsNotExist(err) {
		t.Errorf("stat of a missing file: %v, want not-exist", err)
	}
	// The client closing its side ends the server cleanly.
	cl.Close()
	cw.Close()
	if err := <-done; err != nil {
		t.Fatalf("server: %v", err)
	}
	if err := sftpServer([]string{"x"}, sr, sw); err == nil {
		t.Error("extra arguments were accepted")
	}
}
