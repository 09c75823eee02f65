package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/api/gen/filesystem"
)

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_ATTRIB

// watcher turns inotify events under one directory (optionally its whole
// tree) into envd FilesystemEvents. Names are relative to the root.
type watcher struct {
	f            *os.File // non-blocking inotify fd: Close interrupts Read
	root         string
	recursive    bool
	includeEntry bool
	events       chan *filesystem.FilesystemEvent // closed when the watcher stops
	stop         chan struct{}
	stopOnce     sync.Once

	mu  sync.Mutex
	wds map[int32]string // watch descriptor → directory
}

func newWatcher(root string, recursive, includeEntry bool) (*watcher, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory: %w", root, errInvalid)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &watcher{
		f:            os.NewFile(uintptr(fd), "inotify"),
		root:         root,
		recursive:    recursive,
		includeEntry: includeEntry,
		events:       make(chan *filesystem.FilesystemEvent, 256),
		stop:         make(chan struct{}),
		wds:          map[int32]string{},
	}
	if err := w.add(root); err != nil {
		w.f.Close()
		return nil, err
	}
	go w.run()
	return w, nil
}

// add watches dir and, when recursive, every directory below it.
func (w *watcher) add(dir string) error {
	if !w.recursive {
		return w.addOne(dir)
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return err
			}
			return nil // vanished or unreadable subtree: skip it
		}
		if !d.IsDir() {
			return nil
		}
		if err := w.addOne(path); err != nil && path == dir {
			return err
		}
		return nil
	})
}

func (w *watcher) addOne(dir string) error {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var wd int
	var addErr error
	if err := rc.Control(func(fd uintptr) {
		wd, addErr = unix.InotifyAddWatch(int(fd), dir, watchMask|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
	}); err != nil {
		return err
	}
	if addErr != nil {
		return fmt.Errorf("watch %s: %w", dir, addErr)
	}
	w.mu.Lock()
	w.wds[int32(wd)] = dir
	w.mu.Unlock()
	return nil
}

func (w *watcher) close() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.f.Close()
	})
}

func (w *watcher) run() {
	defer close(w.events)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(raw.Len)]
			off += unix.SizeofInotifyEvent + int(raw.Len)
			name := string(trimNUL(nameBytes))
			if !w.handle(raw.Wd, raw.Mask, name) {
				return
			}
		}
	}
}

func trimNUL(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// handle converts one raw event; false means the watcher was stopped.
func (w *watcher) handle(wd int32, mask uint32, name string) bool {
	w.mu.Lock()
	dir, ok := w.wds[wd]
	if mask&unix.IN_IGNORED != 0 {
		delete(w.wds, wd)
	}
	w.mu.Unlock()
	if !ok || name == "" {
		return true // events about a watched directory itself are reported by its parent
	}
	full := filepath.Join(dir, name)
	var typ filesystem.EventType
	switch {
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		typ = filesystem.EventType_EVENT_TYPE_CREATE
		if w.recursive && mask&unix.IN_ISDIR != 0 {
			_ = w.add(full)
		}
	case mask&unix.IN_MODIFY != 0:
		typ = filesystem.EventType_EVENT_TYPE_WRITE
	case mask&unix.IN_DELETE != 0:
		typ = filesystem.EventType_EVENT_TYPE_REMOVE
	case mask&unix.IN_MOVED_FROM != 0:
		typ = filesystem.EventType_EVENT_TYPE_RENAME
	case mask&unix.IN_ATTRIB != 0:
		typ = filesystem.EventType_EVENT_TYPE_CHMOD
	default:
		return true
	}
	rel, err := filepath.Rel(w.root, full)
	if err != nil {
		rel = full
	}
	ev := &filesystem.FilesystemEvent{Name: rel, Type: typ}
	if w.includeEntry && typ != filesystem.EventType_EVENT_TYPE_REMOVE && typ != filesystem.EventType_EVENT_TYPE_RENAME {
		if e, err := newNames().entry(full); err == nil {
			ev.Entry = e
		}
	}
	select {
	case w.events <- ev:
		return true
	case <-w.stop:
		return false
	}
}

// watcherTable holds the polling watchers of CreateWatcher.
type watcherTable struct {
	mu sync.Mutex
	m  map[string]*polledWatcher
}

// find looks up the watcher id names, taking it out of the table in the
// same locked step when take is set, so that of two removes only one gets
// it to close. An unknown id is errNotFound.
func (t *watcherTable) find(id string, take bool) (*polledWatcher, error) {
	t.mu.Lock()
	pw, ok := t.m[id]
	if take {
		delete(t.m, id)
	}
	t.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("watcher %q: %w", id, errNotFound)
	}
	return pw, nil
}

// polledWatcher buffers a watcher's events until GetWatcherEvents drains
// them; beyond maxPolledEvents the oldest are dropped.
type polledWatcher struct {
	w       *watcher
	mu      sync.Mutex
	pending []*filesystem.FilesystemEvent
}

const maxPolledEvents = 10000

func newWatcherTable() *watcherTable { return &watcherTable{m: map[string]*polledWatcher{}} }

func (t *watcherTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, pw := range t.m {
		pw.w.close()
		delete(t.m, id)
	}
}

func (fsv *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	p, _, err := fsv.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return rpcError(err)
	}
	w, err := newWatcher(p, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return rpcError(err)
	}
	defer w.close()
	start := &filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}
	if err := stream.Send(start); err != nil {
		return err
	}
	keepalive, stop := keepaliveTicker(req.Header())
	defer stop()
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				return nil
			}
			if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: ev}}); err != nil {
				return err
			}
		case <-keepalive:
			ka := &filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}
			if err := stream.Send(ka); err != nil {
				return err
			}
		case <-ctx.Done():
			if deadlinePassed(ctx, 0) {
				return connect.NewError(connect.CodeDeadlineExceeded, errors.New("watch deadline exceeded"))
			}
			return connect.NewError(connect.CodeCanceled, ctx.Err())
		}
	}
}

func (fsv *filesystemService) CreateWatcher(_ context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	p, _, err := fsv.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, rpcError(err)
	}
	w, err := newWatcher(p, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return nil, rpcError(err)
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	pw := &polledWatcher{w: w}
	go func() {
		for ev := range w.events {
			pw.mu.Lock()
			pw.pending = append(pw.pending, ev)
			if len(pw.pending) > maxPolledEvents {
				pw.pending = pw.pending[len(pw.pending)-maxPolledEvents:]
			}
			pw.mu.Unlock()
		}
	}()
	t := fsv.s.watch
	t.mu.Lock()
	t.m[id] = pw
	t.mu.Unlock()
	return connect.NewResponse(&filesystem.CreateWatcherResponse{WatcherId: id}), nil
}

func (fsv *filesystemService) GetWatcherEvents(_ context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	pw, err := fsv.s.watch.find(req.Msg.GetWatcherId(), false)
	if err != nil {
		return nil, rpcError(err)
	}
	pw.mu.Lock()
	evs := pw.pending
	pw.pending = nil
	pw.mu.Unlock()
	return connect.NewResponse(&filesystem.GetWatcherEventsResponse{Events: evs}), nil
}

func (fsv *filesystemService) RemoveWatcher(_ context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	pw, err := fsv.s.watch.find(req.Msg.GetWatcherId(), true)
	if err != nil {
		return nil, rpcError(err)
	}
	pw.w.close()
	return connect.NewResponse(&filesystem.RemoveWatcherResponse{}), nil
}
