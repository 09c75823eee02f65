package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/api/gen/filesystem"
)

func TestFilesystemRPCs(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "a", "f.txt"), []byte("12345"), 0o600)
	os.Symlink("f.txt", filepath.Join(dir, "a", "link"))

	t.Run("list depth", func(t *testing.T) {
		for _, tc := range []struct {
			depth uint32
			want  []string
		}{
			{0, []string{"a/b", "a/f.txt", "a/link"}},
			{1, []string{"a/b", "a/f.txt", "a/link"}},
			{2, []string{"a/b", "a/b/c", "a/f.txt", "a/link"}},
		} {
			resp, err := e.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: filepath.Join(dir, "a"), Depth: tc.depth}))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, en := range resp.Msg.GetEntries() {
				rel, _ := filepath.Rel(dir, en.GetPath())
				got = append(got, rel)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("depth %d (-want +got):\n%s", tc.depth, diff)
			}
		}
	})

	t.Run("stat entry", func(t *testing.T) {
		resp, err := e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: filepath.Join(dir, "a", "link")}))
		if err != nil {
			t.Fatal(err)
		}
		en := resp.Msg.GetEntry()
		if en.GetType() != filesystem.FileType_FILE_TYPE_SYMLINK || en.GetSymlinkTarget() != "f.txt" || en.GetName() != "link" {
			t.Fatalf("symlink entry = %v", en)
		}
		resp, err = e.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: filepath.Join(dir, "a", "f.txt")}))
		if err != nil {
			t.Fatal(err)
		}
		en = resp.Msg.GetEntry()
		if en.GetSize() != 5 || en.GetPermissions() != "-rw-------" || os.FileMode(en.GetMode()) != 0o600 ||
			en.GetOwner() == "" || en.GetGroup() == "" || en.GetModifiedTime().AsTime().IsZero() {
			t.Fatalf("file entry = %v", en)
		}
	})

	t.Run("move and remove", func(t *testing.T) {
		dst := filepath.Join(dir, "moved", "g.txt")
		resp, err := e.fs.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: filepath.Join(dir, "a", "f.txt"), Destination: dst}))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Msg.GetEntry().GetPath() != dst {
			t.Fatalf("moved entry path %q", resp.Msg.GetEntry().GetPath())
		}
		if _, err := e.fs.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: filepath.Join(dir, "nope"), Destination: dst})); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("move missing: %v", err)
		}
		if _, err := e.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: filepath.Join(dir, "a")})); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
			t.Fatalf("a still exists: %v", err)
		}
		if _, err := e.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: filepath.Join(dir, "a")})); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("remove missing: %v", err)
		}
	})

	t.Run("mkdir", func(t *testing.T) {
		p := filepath.Join(dir, "x", "y")
		resp, err := e.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: p}))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Msg.GetEntry().GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY {
			t.Fatalf("entry %v", resp.Msg.GetEntry())
		}
		if _, err := e.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: p})); connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatalf("second mkdir: %v", err)
		}
	})
}

func TestWatchDir(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	stream, err := e.fs.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: dir, Recursive: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("first event %v (%v), want start", stream.Msg(), stream.Err())
	}
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Wait for the directory's create event: only then is sub watched.
	type ev struct {
		Name string
		Type filesystem.EventType
	}
	var got []ev
	next := func(until ev) {
		t.Helper()
		for stream.Receive() {
			fe := stream.Msg().GetFilesystem()
			if fe == nil {
				continue
			}
			got = append(got, ev{fe.GetName(), fe.GetType()})
			if got[len(got)-1] == until {
				return
			}
		}
		t.Fatalf("stream ended before %v: %v; got %v", until, stream.Err(), got)
	}
	next(ev{"sub", filesystem.EventType_EVENT_TYPE_CREATE})
	if err := os.WriteFile(filepath.Join(dir, "sub", "inner.txt"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	next(ev{"sub/inner.txt", filesystem.EventType_EVENT_TYPE_CREATE})
	if err := os.Remove(filepath.Join(dir, "new.txt")); err != nil {
		t.Fatal(err)
	}
	next(ev{"new.txt", filesystem.EventType_EVENT_TYPE_REMOVE})
	for _, want := range []ev{{"new.txt", filesystem.EventType_EVENT_TYPE_CREATE}, {"new.txt", filesystem.EventType_EVENT_TYPE_WRITE}} {
		if !slices.Contains(got, want) {
			t.Errorf("events %v lack %v", got, want)
		}
	}

	t.Run("missing dir", func(t *testing.T) {
		s, err := e.fs.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: filepath.Join(dir, "nope")}))
		if err == nil {
			for s.Receive() {
			}
			err = s.Err()
		}
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("err = %v, want not_found", err)
		}
	})
}

func TestPolledWatcher(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	resp, err := e.fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: dir}))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Msg.GetWatcherId()
	os.WriteFile(filepath.Join(dir, "p.txt"), nil, 0o644)
	var names []string
	for !slices.Contains(names, "p.txt") {
		evs, err := e.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Msg.GetEvents() {
			names = append(names, ev.GetName())
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no event for p.txt; got %v", names)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if _, err := e.fs.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("events of removed watcher: %v", err)
	}
}
