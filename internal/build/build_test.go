package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/dockerfile"
)

// fakeFS is a build sandbox's disk: path → "dir", or a file's content
// with its owner and mode.
type fakeFS map[string]string

// fakeRunner starts fakeBoxes; snapshots are copies of their disks.
type fakeRunner struct {
	snaps  map[string]fakeFS
	starts []string // the snapshot each start began from
	execs  [][]string
	fail   map[string]int // argv[last] → exit code
}

func (r *fakeRunner) Start(ctx context.Context, snap string) (Box, error) {
	r.starts = append(r.starts, snap)
	fs := fakeFS{"/": "dir"}
	if snap != "" {
		src, ok := r.snaps[snap]
		if !ok {
			return nil, fmt.Errorf("no snapshot %s", snap)
		}
		fs = maps.Clone(src)
	}
	return &fakeBox{r: r, fs: fs}, nil
}

type fakeBox struct {
	r  *fakeRunner
	fs fakeFS
}

func (b *fakeBox) Exec(ctx context.Context, argv, env []string, user, workdir string, stdout, stderr func([]byte)) (int, error) {
	b.r.execs = append(b.r.execs, argv)
	cmd := argv[len(argv)-1]
	if code, ok := b.r.fail[cmd]; ok {
		stderr([]byte("boom\n"))
		return code, nil
	}
	stdout([]byte("ran " + cmd + "\n"))
	b.fs["/ran/"+strings.ReplaceAll(cmd, "/", "_")] = fmt.Sprintf("user=%s cwd=%s env=%s", user, workdir, strings.Join(env, ","))
	return 0, nil
}

func (b *fakeBox) Extract(ctx context.Context, dir, owner string, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if _, ok := b.fs[p]; !ok {
				b.fs[p] = "dir"
			}
		default:
			data, _ := io.ReadAll(tr)
			b.fs[p] = fmt.Sprintf("%s owner=%s mode=%o", data, owner, hdr.Mode)
		}
	}
}

func (b *fakeBox) IsDir(ctx context.Context, p string) bool { return b.fs[p] == "dir" }

func (b *fakeBox) Snapshot(ctx context.Context) (string, error) {
	id := fmt.Sprintf("snap-%d", len(b.r.snaps)+1)
	b.r.snaps[id] = maps.Clone(b.fs)
	return id, nil
}

func (b *fakeBox) Close(ctx context.Context) error { return nil }

type fakeCache map[string]string

func (c fakeCache) Get(ctx context.Context, key string) (string, bool) { s, ok := c[key]; return s, ok }
func (c fakeCache) Put(ctx context.Context, key, snap string) error    { c[key] = snap; return nil }

// contextTar writes files (a trailing "/" makes a directory) as a tar file.
func contextTar(t *testing.T, files map[string]string) *Context {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := slices.Sorted(maps.Keys(files))
	for _, n := range names {
		if strings.HasSuffix(n, "/") {
			tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeDir, Mode: 0o755})
			continue
		}
		tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))})
		tw.Write([]byte(files[n]))
	}
	tw.Close()
	p := filepath.Join(t.TempDir(), "ctx.tar")
	os.WriteFile(p, buf.Bytes(), 0o600)
	c, err := OpenContext(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func gzTar(name, content string) string {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(content))})
	tw.Write([]byte(content))
	tw.Close()
	zw.Close()
	return buf.String()
}

func plan(t *testing.T, text string) dockerfile.Plan {
	t.Helper()
	f, err := dockerfile.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.Plan(dockerfile.State{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const testDockerfile = `FROM busybox
RUN first
WORKDIR /srv
COPY app.txt ./
COPY conf/ /etc/app/
ADD data.tar.gz /data/
COPY --chown=user --chmod=0700 bin/* /opt/
ENV MODE=prod
USER user
RUN last
`

func TestBuildAndCache(t *testing.T) {
	files := map[string]string{"app.txt": "v1", "conf/a.conf": "a", "conf/sub/b.conf": "b",
		"data.tar.gz": gzTar("inside/x", "x"), "bin/tool": "tool", "bin/other": "other", "unused": "u"}
	r := &fakeRunner{snaps: map[string]fakeFS{}}
	cache := fakeCache{}
	var events []Event
	b := &Builder{Runner: r, Cache: cache, Context: contextTar(t, files), BaseKey: "busybox@v1", Log: func(e Event) { events = append(events, e) }}
	res, err := b.Run(context.Background(), plan(t, testDockerfile))
	if err != nil {
		t.Fatal(err)
	}
	if res.Hits != 0 || res.Misses != 7 {
		t.Errorf("cold build: %d hits %d misses, want 0 and 7", res.Hits, res.Misses)
	}
	if diff := cmp.Diff([]string{""}, r.starts); diff != "" {
		t.Errorf("a cold build starts one sandbox on the bare base (-want +got):\n%s", diff)
	}
	fs := r.snaps[res.SnapshotID]
	want := map[string]string{
		"/srv/app.txt":        "v1 owner= mode=644",
		"/etc/app/a.conf":     "a owner= mode=644",
		"/etc/app/sub/b.conf": "b owner= mode=644",
		"/data/inside/x":      "x owner= mode=600",
		"/opt/tool":           "tool owner=user mode=700",
		"/opt/other":          "other owner=user mode=700",
		"/ran/first":          "user= cwd=/ env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"/ran/last":           "user=user cwd=/srv env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin,MODE=prod",
	}
	for p, w := range want {
		if fs[p] != w {
			t.Errorf("%s = %q, want %q", p, fs[p], w)
		}
	}
	if fs["/srv"] != "dir" {
		t.Error("WORKDIR did not make /srv")
	}
	if _, ok := fs["/unused"]; ok {
		t.Error("a file no COPY names was copied")
	}

	// The same build again: every file step is a cache hit, no sandbox.
	r.starts, r.execs = nil, nil
	res2, err := b.Run(context.Background(), plan(t, testDockerfile))
	if err != nil {
		t.Fatal(err)
	}
	if res2.Hits != 7 || res2.Misses != 0 || len(r.starts) != 0 || res2.SnapshotID != res.SnapshotID {
		t.Errorf("cached build: %+v, starts %v", res2, r.starts)
	}

	// One copied file changes: the steps before it are reused, the
	// sandbox starts from the snapshot before that COPY, the rest run.
	files["app.txt"] = "v2"
	b.Context = contextTar(t, files)
	r.starts, r.execs = nil, nil
	res3, err := b.Run(context.Background(), plan(t, testDockerfile))
	if err != nil {
		t.Fatal(err)
	}
	if res3.Hits != 2 || res3.Misses != 5 {
		t.Errorf("rebuild after a change: %d hits %d misses, want 2 and 5", res3.Hits, res3.Misses)
	}
	if len(r.starts) != 1 || r.starts[0] == "" {
		t.Errorf("rebuild started from %v, want the WORKDIR step's snapshot", r.starts)
	}
	if diff := cmp.Diff([][]string{{"/bin/sh", "-c", "last"}}, r.execs); diff != "" {
		t.Errorf("rebuild runs (-want +got):\n%s", diff)
	}
	if got := r.snaps[res3.SnapshotID]["/srv/app.txt"]; got != "v2 owner= mode=644" {
		t.Errorf("app.txt = %q", got)
	}

	// --no-cache runs everything again.
	b.NoCache = true
	r.starts = nil
	res4, err := b.Run(context.Background(), plan(t, testDockerfile))
	if err != nil || res4.Hits != 0 || res4.Misses != 7 {
		t.Errorf("no-cache build: %+v, %v", res4, err)
	}
}

func TestBuildFailures(t *testing.T) {
	for _, tc := range []struct {
		name, dockerfile string
		files            map[string]string
		line, step       int
		exit             *int
		msg              string
	}{
		{name: "RUN exits non-zero", dockerfile: "FROM busybox\nRUN ok\nENV A=1\nRUN broken\nRUN never\n",
			line: 4, step: 3, exit: ptr(3), msg: "exited with code 3"},
		{name: "COPY of a missing file", dockerfile: "FROM busybox\nCOPY nope /x\n", line: 2, step: 1, msg: "not found in the build context"},
		{name: "COPY from outside the context", dockerfile: "FROM busybox\nCOPY ../etc/passwd /x\n", line: 2, step: 1, msg: "outside the build context"},
		{name: "glob matching nothing", dockerfile: "FROM busybox\nCOPY *.go /src/\n", line: 2, step: 1, msg: "no file in the build context matches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &fakeRunner{snaps: map[string]fakeFS{}, fail: map[string]int{"broken": 3}}
			b := &Builder{Runner: r, Cache: fakeCache{}, Context: contextTar(t, map[string]string{"a": "a"}), BaseKey: "b"}
			_, err := b.Run(context.Background(), plan(t, tc.dockerfile))
			var se *StepError
			if !errors.As(err, &se) {
				t.Fatalf("Run = %v, want a StepError", err)
			}
			if se.Line != tc.line || se.Step != tc.step || !cmp.Equal(se.ExitCode, tc.exit) || !strings.Contains(se.Error(), tc.msg) {
				t.Errorf("StepError %q: line %d step %d exit %v", se, se.Line, se.Step, se.ExitCode)
			}
			if slices.ContainsFunc(r.execs, func(a []string) bool { return a[len(a)-1] == "never" }) {
				t.Error("a step after the failure ran")
			}
		})
	}
}

func ptr(i int) *int { return &i }

func TestCopyIntoExistingDirectory(t *testing.T) {
	r := &fakeRunner{snaps: map[string]fakeFS{"base": {"/": "dir", "/etc": "dir"}}}
	runner := &snapRunner{fakeRunner: r, base: "base"}
	b := &Builder{Runner: runner, Context: contextTar(t, map[string]string{"f.conf": "c"}), BaseKey: "b"}
	res, err := b.Run(context.Background(), plan(t, "FROM busybox\nCOPY f.conf /etc\nCOPY f.conf /new\n"))
	if err != nil {
		t.Fatal(err)
	}
	fs := r.snaps[res.SnapshotID]
	if fs["/etc/f.conf"] == "" || fs["/new"] == "" {
		t.Errorf("COPY into an existing dir and to a new path: %v", fs)
	}
}

// snapRunner starts bare-base boxes from a given snapshot.
type snapRunner struct {
	*fakeRunner
	base string
}

func (r *snapRunner) Start(ctx context.Context, snap string) (Box, error) {
	if snap == "" {
		snap = r.base
	}
	return r.fakeRunner.Start(ctx, snap)
}
