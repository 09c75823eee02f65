package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/platinum-dev/platinum/api/gen/filesystem"
	"github.com/platinum-dev/platinum/api/gen/filesystem/filesystemconnect"
)

// filesystemService is the thin Connect shim of filesystem.Filesystem.
type filesystemService struct{ s *Server }

var _ filesystemconnect.FilesystemHandler = (*filesystemService)(nil)

// resolve authenticates the caller's user and resolves path against its home.
func (fsv *filesystemService) resolve(h http.Header, path string) (string, *account, error) {
	acct, err := fsv.s.accountFor(h)
	if err != nil {
		return "", nil, err
	}
	p, err := resolvePath(path, acct.home)
	if err != nil {
		return "", nil, err
	}
	return p, acct, nil
}

func (fsv *filesystemService) Stat(_ context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	p, _, err := fsv.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, rpcError(err)
	}
	e, err := newNames().entry(p)
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
}

func (fsv *filesystemService) MakeDir(_ context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	p, acct, err := fsv.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, rpcError(err)
	}
	if fi, err := os.Stat(p); err == nil {
		if fi.IsDir() {
			return nil, rpcError(fmt.Errorf("directory %s: %w", p, errExists))
		}
		return nil, rpcError(fmt.Errorf("%s: exists and is not a directory: %w", p, errInvalid))
	}
	if err := mkdirAll(p, acct); err != nil {
		return nil, rpcError(err)
	}
	e, err := newNames().entry(p)
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: e}), nil
}

func (fsv *filesystemService) Move(_ context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	src, acct, err := fsv.resolve(req.Header(), req.Msg.GetSource())
	if err != nil {
		return nil, rpcError(err)
	}
	dst, err := resolvePath(req.Msg.GetDestination(), acct.home)
	if err != nil {
		return nil, rpcError(err)
	}
	if _, err := os.Lstat(src); err != nil {
		return nil, rpcError(err)
	}
	if err := mkdirAll(filepath.Dir(dst), acct); err != nil {
		return nil, rpcError(err)
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, rpcError(err)
	}
	e, err := newNames().entry(dst)
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: e}), nil
}

func (fsv *filesystemService) ListDir(_ context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	p, _, err := fsv.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, rpcError(err)
	}
	depth := int(req.Msg.GetDepth())
	if depth < 1 {
		depth = 1
	}
	fi, err := os.Stat(p) // a symlink to a directory may be listed
	if err != nil {
		return nil, rpcError(err)
	}
	if !fi.IsDir() {
		return nil, rpcError(fmt.Errorf("%s: not a directory: %w", p, errInvalid))
	}
	names := newNames()
	var entries []*filesystem.EntryInfo
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		des, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, de := range des {
			full := filepath.Join(dir, de.Name())
			e, err := names.entry(full)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while listing
			}
			if err != nil {
				return err
			}
			entries = append(entries, e)
			if de.IsDir() && level < depth {
				if err := walk(full, level+1); err != nil && !errors.Is(err, fs.ErrPermission) {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(p, 1); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.ListDirResponse{Entries: entries}), nil
}

func (fsv *filesystemService) Remove(_ context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	p, _, err := fsv.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, rpcError(err)
	}
	if _, err := os.Lstat(p); err != nil {
		return nil, rpcError(err)
	}
	if err := os.RemoveAll(p); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

// names caches uid/gid → name lookups for one request.
type names struct{ users, groups map[uint32]string }

func newNames() *names { return &names{users: map[uint32]string{}, groups: map[uint32]string{}} }

func (n *names) user(uid uint32) string {
	if v, ok := n.users[uid]; ok {
		return v
	}
	v := userName(uid)
	n.users[uid] = v
	return v
}

func (n *names) group(gid uint32) string {
	if v, ok := n.groups[gid]; ok {
		return v
	}
	v := groupName(gid)
	n.groups[gid] = v
	return v
}

// entry describes path (not following a final symlink) the way envd does.
func (n *names) entry(path string) (*filesystem.EntryInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	e := &filesystem.EntryInfo{
		Name:         fi.Name(),
		Path:         path,
		Size:         fi.Size(),
		Mode:         uint32(fi.Mode()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = filesystem.FileType_FILE_TYPE_SYMLINK
		if target, err := os.Readlink(path); err == nil {
			e.SymlinkTarget = &target
		}
	case fi.IsDir():
		e.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
	default:
		e.Type = filesystem.FileType_FILE_TYPE_FILE
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner = n.user(st.Uid)
		e.Group = n.group(st.Gid)
	}
	e.Metadata = xattrs(path)
	return e, nil
}

const xattrPrefix = "user.e2b."

// xattrs returns the user.e2b.* extended attributes, prefix stripped.
func xattrs(path string) map[string]string {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(path, buf)
	if err != nil || n == 0 {
		return nil
	}
	var out map[string]string
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		key, ok := strings.CutPrefix(name, xattrPrefix)
		if !ok {
			continue
		}
		val := make([]byte, 4096)
		m, err := unix.Lgetxattr(path, name, val)
		if err != nil {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[key] = string(val[:m])
	}
	return out
}
