package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// smallFS mounts a new ext4 filesystem of size MiB (a file in the test's temp dir on
// a loop device) and returns its mount point; the test's cleanup unmounts
// it (which frees the loop device) and removes the file.
func smallFS(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err == nil {
		err = errors.Join(f.Truncate(int64(size)<<20), f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	// Registered after t.TempDir's, so it runs first.
	t.Cleanup(func() {
		for i := 0; ; i++ {
			out, err := exec.Command("umount", mnt).CombinedOutput()
			if err == nil {
				return
			}
			if i == 20 {
				t.Errorf("umount %s: %v: %s", mnt, err, out)
				exec.Command("umount", "-l", mnt).Run()
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
	return mnt
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// fillTo allocates a file in dir that leaves about left bytes free and
// returns a func that removes it.
func fillTo(t *testing.T, dir string, left int64) func() {
	t.Helper()
	path := filepath.Join(dir, "filler")
	n := freeBytes(t, dir) - left
	if n <= 0 {
		t.Fatalf("%s has only %d bytes free, want more than %d", dir, freeBytes(t, dir), left)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
		t.Fatal(err)
	}
	return func() { os.Remove(path) }
}

// tree lists every path under dir but the filler.
func tree(dir string) []string {
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && filepath.Base(p) != "filler" && filepath.Base(p) != "platinum.db-wal" && filepath.Base(p) != "platinum.db-shm" && filepath.Base(p) != "platinum.db" {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// TestDataDirFull: with the data dir's filesystem under --min-free-mb, a
// create answers 507 no_space and makes nothing (no record, no file under
// the data dir), an upload answers 507 and writes nothing, and an upload
// whose Content-Length would take the filesystem under the mark is
// refused the same way before a byte is written; running sandboxes keep
// working. Once space is freed, creates and uploads work again.
func TestDataDirFull(t *testing.T) {
	dataDir := smallFS(t, 1024)
	d := startPtd(t, ptdtest.Options{DataDir: dataDir, ExtraArgs: []string{"--min-free-mb", "200", "--spare-disks", "0"}})
	a := apiOf(t, d)
	id := a.create("runc", nil)
	sandboxes := func() float64 {
		code, m, b := a.do("GET", "/v1/sandboxes?include=destroyed,failed&paginated=true", nil)
		if code != 200 {
			t.Fatalf("list: %d %s", code, b)
		}
		return m["total"].(float64)
	}
	upload := func(path string, body []byte) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), "PUT", d.URL+"/v1/sandboxes/"+id+"/files?path="+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+d.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("upload %s: %v", path, err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	before, files := sandboxes(), tree(dataDir)

	unfill := fillTo(t, dataDir, 100<<20)
	code, m, b := a.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox"})
	if code != 507 || m["code"] != "no_space" {
		t.Fatalf("create with the data dir full: %d %s, want 507 no_space", code, b)
	}
	if got := sandboxes(); got != before {
		t.Errorf("a refused create changed the sandbox count: %v, want %v", got, before)
	}
	if got := tree(dataDir); !slices.Equal(got, files) {
		t.Errorf("a refused create left files in the data dir:\nbefore %v\nafter  %v", files, got)
	}
	if code, m := upload("/root/small", []byte("hello")); code != 507 || m["code"] != "no_space" {
		t.Fatalf("upload with the data dir full: %d %v, want 507 no_space", code, m)
	}
	if code, _, _ := a.do("GET", "/v1/sandboxes/"+id+"/files?path=/root/small", nil); code != 404 {
		t.Errorf("a refused upload left /root/small (GET answers %d)", code)
	}
	// The sandbox keeps running.
	if out := a.sh(id, "echo ok"); out != "ok\n" {
		t.Errorf("exec in the running sandbox: %q", out)
	}
	unfill()

	// 150 MiB over the mark: an upload of 200 MiB would go under it.
	unfill = fillTo(t, dataDir, 350<<20)
	if code, m := upload("/root/big", make([]byte, 200<<20)); code != 507 || m["code"] != "no_space" {
		t.Fatalf("a 200 MiB upload with 150 MiB above the mark: %d %v, want 507 no_space", code, m)
	}
	if code, _, _ := a.do("GET", "/v1/sandboxes/"+id+"/files?path=/root/big", nil); code != 404 {
		t.Errorf("a refused upload left /root/big (GET answers %d)", code)
	}
	if code, m := upload("/root/small", []byte("hello")); code != 200 {
		t.Fatalf("a small upload with 150 MiB above the mark: %d %v", code, m)
	}
	unfill()

	id2 := a.create("runc", nil)
	a.do("DELETE", "/v1/sandboxes/"+id2, nil)
	a.do("DELETE", "/v1/sandboxes/"+id, nil)
	a.settle(id2, 2*time.Minute)
	a.settle(id, 2*time.Minute)
}
