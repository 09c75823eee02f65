package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/platinum-dev/platinum/api/gen/filesystem/filesystemconnect"
	"github.com/platinum-dev/platinum/api/gen/process/processconnect"
)

// Fuzz targets for the request bodies of pt-agent's envd surface: the
// Connect RPCs of the process and filesystem services in envd's JSON wire
// format (what the E2B SDKs send), and POST /init. Each input goes through
// a real Server (Connect's decoding, the auth interceptor, the handlers)
// and holds two properties:
//   - bad input is a client error (a Connect code such as
//     invalid_argument or not_found), never internal or unknown, and never
//     a panic;
//   - a refused call changes nothing on disk.
//
// A fuzzed call must never reach the test machine: a confining interceptor
// runs ahead of the handlers and rewrites every path the decoded request
// names (path, source, destination, cwd; empty ones too) into a temporary
// directory, and every command into /bin/true. What is fuzzed is everything Connect and
// the handlers do with the rest of the request.

// rpcFuzzer is a Server whose RPC routes run behind the confining
// interceptor, with its jail directory.
type rpcFuzzer struct {
	s    *Server
	mux  *http.ServeMux
	jail string
}

const fuzzToken = "fuzz-token"

func newRPCFuzzer(f *testing.F) *rpcFuzzer {
	f.Helper()
	cfg := DefaultConfig()
	cfg.Token = fuzzToken
	cfg.EndRetention = time.Second
	s, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	z := &rpcFuzzer{s: s, jail: f.TempDir()}
	opts := connect.WithInterceptors(confine{jail: z.jail}, authInterceptor{s})
	z.mux = http.NewServeMux()
	z.mux.Handle(processconnect.NewProcessHandler(&processService{s}, opts))
	z.mux.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{s}, opts))
	for _, d := range []string{"home/user/dir", "tmp"} {
		if err := os.MkdirAll(filepath.Join(z.jail, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(z.jail, "home/user/file.txt"), []byte("hello\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	return z
}

// confine rewrites a decoded request before any handler sees it: every
// path into the jail, every command into /bin/true.
type confine struct{ jail string }

func (c confine) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if m, ok := req.Any().(interface{ ProtoReflect() protoreflect.Message }); ok {
			c.rewrite(m.ProtoReflect())
		}
		return next(ctx, req)
	}
}

func (c confine) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (c confine) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return next(ctx, confinedConn{conn, c})
	}
}

type confinedConn struct {
	connect.StreamingHandlerConn
	c confine
}

func (cc confinedConn) Receive(msg any) error {
	if err := cc.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if m, ok := msg.(interface{ ProtoReflect() protoreflect.Message }); ok {
		cc.c.rewrite(m.ProtoReflect())
	}
	return nil
}

// rewrite walks m and its nested messages. It visits every path field
// the message type has, set or not: an unset path is the user's home,
// which on the host running the fuzzer is /root, and a Move or Remove of
// it there must never happen.
func (c confine) rewrite(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsList() || fd.IsMap() {
			continue
		}
		switch {
		case fd.Kind() == protoreflect.MessageKind:
			if m.Has(fd) {
				c.rewrite(m.Get(fd).Message())
			}
		case fd.Kind() == protoreflect.StringKind:
			if od := fd.ContainingOneof(); od != nil {
				if in := m.WhichOneof(od); in != nil && in != fd {
					continue // another member of its oneof is the one in use
				}
			}
			switch fd.Name() {
			case "path", "source", "destination", "cwd":
				// An empty path goes to a place of its own in the jail
				// (FuzzResolvePath covers the agent's resolution of it).
				p := m.Get(fd).String()
				if p == "" {
					p = "/empty"
				}
				m.Set(fd, protoreflect.ValueOfString(filepath.Join(c.jail, filepath.Clean("/"+p))))
			case "cmd":
				m.Set(fd, protoreflect.ValueOfString("/bin/true"))
			}
		}
	}
}

// tree lists the jail: every path with its mode and size.
func (z *rpcFuzzer) tree(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(z.jail, func(p string, d fs.DirEntry, err error) error {
		if p == z.jail && errors.Is(err, fs.ErrNotExist) {
			return nil // a Remove of "/" took the jail itself: an empty tree
		}
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		size := fi.Size()
		if fi.IsDir() {
			size = 0
		}
		out = append(out, fmt.Sprintf("%s %v %d", strings.TrimPrefix(p, z.jail), fi.Mode(), size))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rpc is one RPC method and whether it streams from the server (Connect
// then frames the request and the answer in envelopes).
type rpc struct {
	procedure string
	streaming bool
}

// call sends body to procedure in envd's JSON format and returns the
// Connect error code of the answer ("" for success).
func (z *rpcFuzzer) call(t *testing.T, m rpc, body []byte) (code string, answer []byte) {
	t.Helper()
	// Streams (a watch, a process's output) run until their client goes:
	// this one goes after a moment.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ctype := "application/json"
	if m.streaming {
		ctype = "application/connect+json"
		var env bytes.Buffer
		env.WriteByte(0)
		binary.Write(&env, binary.BigEndian, uint32(len(body)))
		env.Write(body)
		body = env.Bytes()
	}
	r := httptest.NewRequestWithContext(ctx, "POST", "http://agent"+m.procedure, bytes.NewReader(body))
	r.Header.Set("Content-Type", ctype)
	r.Header.Set("Connect-Protocol-Version", "1")
	r.Header.Set(headerToken, fuzzToken)
	rec := httptest.NewRecorder()
	z.mux.ServeHTTP(rec, r)
	answer = rec.Body.Bytes()
	var end struct {
		Code  string `json:"code"`
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if !m.streaming {
		if rec.Code == http.StatusOK {
			return "", answer
		}
		if err := json.Unmarshal(answer, &end); err != nil || end.Code == "" {
			t.Fatalf("%s %q: %d %q: want a Connect error", m.procedure, body, rec.Code, answer)
		}
		return end.Code, answer
	}
	// The last envelope of a stream (flag 2) carries its error, if any.
	rest := answer
	for len(rest) >= 5 {
		flags, n := rest[0], binary.BigEndian.Uint32(rest[1:5])
		if uint32(len(rest)-5) < n {
			break
		}
		msg := rest[5 : 5+n]
		rest = rest[5+n:]
		if flags&2 != 0 {
			if err := json.Unmarshal(msg, &end); err != nil {
				t.Fatalf("%s %q: end of stream %q", m.procedure, body, msg)
			}
			if end.Error != nil {
				return end.Error.Code, answer
			}
			return "", answer
		}
	}
	if rec.Code != http.StatusOK {
		if err := json.Unmarshal(answer, &end); err == nil && end.Code != "" {
			return end.Code, answer
		}
	}
	t.Fatalf("%s %q: %d %q: a stream without its end", m.procedure, body, rec.Code, answer)
	return "", nil
}

// clientCodes are the Connect codes a request's own fault may earn.
var clientCodes = map[string]bool{
	"invalid_argument": true, "not_found": true, "already_exists": true, "failed_precondition": true,
	"out_of_range": true, "permission_denied": true, "unimplemented": true, "resource_exhausted": true,
	// A stream this test ends (a watch) ends this way.
	"deadline_exceeded": true, "canceled": true,
}

func (z *rpcFuzzer) fuzz(f *testing.F, methods []rpc) {
	f.Fuzz(func(t *testing.T, method uint8, body []byte) {
		m := methods[int(method)%len(methods)]
		before := z.tree(t)
		code, answer := z.call(t, m, body)
		z.s.watch.closeAll() // watchers the input made would pile up
		t.Logf("%s %q: %q %.200q", m.procedure, body, code, answer)
		if code == "" {
			return
		}
		if !clientCodes[code] {
			t.Fatalf("%s %q: %s %q: bad input must be a client error", m.procedure, body, code, answer)
		}
		if code != "deadline_exceeded" && code != "canceled" {
			if d := cmp.Diff(before, z.tree(t)); d != "" {
				t.Fatalf("%s %q: %s changed the disk (-before +after):\n%s", m.procedure, body, code, d)
			}
		}
	})
}

// FuzzProcessRPC fuzzes the process service's requests; the first
// argument picks the method.
func FuzzProcessRPC(f *testing.F) {
	z := newRPCFuzzer(f)
	p := "/" + processconnect.ProcessName + "/"
	z.fuzz(f, []rpc{{p + "List", false}, {p + "Start", true}, {p + "Connect", true}, {p + "Update", false},
		{p + "SendInput", false}, {p + "SendSignal", false}, {p + "CloseStdin", false}, {p + "StreamInput", true}})
}

// FuzzFilesystemRPC fuzzes the filesystem service's requests; the first
// argument picks the method.
func FuzzFilesystemRPC(f *testing.F) {
	z := newRPCFuzzer(f)
	p := "/" + filesystemconnect.FilesystemName + "/"
	z.fuzz(f, []rpc{{p + "Stat", false}, {p + "MakeDir", false}, {p + "Move", false}, {p + "ListDir", false},
		{p + "Remove", false}, {p + "WatchDir", true}, {p + "CreateWatcher", false}, {p + "GetWatcherEvents", false},
		{p + "RemoveWatcher", false}})
}

// FuzzInitBody fuzzes POST /init: a body is applied or refused with a 4xx
// and changes nothing (token, environment, default user and directory).
func FuzzInitBody(f *testing.F) {
	cfg := DefaultConfig()
	cfg.Token = fuzzToken
	s, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	type state struct {
		Token, User, Workdir string
		Env                  map[string]string
	}
	read := func() state {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return state{s.token, s.user, s.workdr, s.env}
	}
	initial := read()
	f.Fuzz(func(t *testing.T, body []byte) {
		s.mu.Lock() // every input starts from the initial state
		s.token, s.user, s.workdr, s.env = initial.Token, initial.User, initial.Workdir, map[string]string{}
		s.mu.Unlock()
		before := read()
		r := httptest.NewRequest("POST", "http://agent/init", bytes.NewReader(body))
		r.Header.Set(headerToken, fuzzToken)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		answer, _ := io.ReadAll(rec.Body)
		switch {
		case rec.Code == http.StatusNoContent:
		case rec.Code >= 400 && rec.Code < 500:
			if d := cmp.Diff(before, read()); d != "" {
				t.Fatalf("%q: %d %s changed the agent (-before +after):\n%s", body, rec.Code, answer, d)
			}
		default:
			t.Fatalf("%q: %d %s: want 204 or a 4xx", body, rec.Code, answer)
		}
	})
}
