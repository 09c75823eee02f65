package image

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// tree is a directory being written. Every path is resolved beneath its
// root by the kernel with no symlink followed (openat2), so nothing a
// layer contains can make a write land outside it.
type tree struct {
	dir  string // absolute path of the root, for os.RemoveAll of verified subtrees
	root int    // O_PATH-free directory fd of the root
}

func openTree(dir string) (*tree, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return &tree{dir: dir, root: fd}, nil
}

func (t *tree) close() { unix.Close(t.root) }

// beneath is how every lookup below a tree's root resolves: no symlink,
// no magic link, never above the root.
var beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openBeneath opens the directory name in dir, resolved beneath dir.
func openBeneath(dir int, name string) (int, error) {
	return unix.Openat2(dir, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: uint64(beneath)})
}

// mkdirOpen opens the directory name in dir, making it first unless
// exists says it is there already: how layers and tarballs put a
// directory entry in place before they set its metadata.
func mkdirOpen(dir int, name string, exists bool) (int, error) {
	if !exists {
		if err := unix.Mkdirat(dir, name, 0o700); err != nil {
			return -1, err
		}
	}
	return openBeneath(dir, name)
}

// openDir opens the directory rel ("." is the root). ELOOP means a
// component is a symlink; ENOTDIR that one is not a directory.
func (t *tree) openDir(rel string) (int, error) {
	if rel == "" || rel == "." {
		return unix.Dup(t.root)
	}
	for {
		fd, err := openBeneath(t.root, rel)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		return fd, err
	}
}

// errThroughSymlink reports a path with a symlink where a directory must be.
type errThroughSymlink struct{ path, link string }

func (e *errThroughSymlink) Error() string {
	return fmt.Sprintf("%q goes through the symlink %q", e.path, e.link)
}

// mkdirAll opens directory rel, creating missing components (root-owned,
// 0755). A component that is a symlink is an *errThroughSymlink; one that
// is another non-directory is replaced by a directory only when replace is
// set (overlay semantics: a directory in a newer layer hides what an older
// one had there), else it is an error.
func (t *tree) mkdirAll(rel string, replace bool) (int, error) {
	fd, err := unix.Dup(t.root)
	if err != nil {
		return -1, err
	}
	if rel == "" || rel == "." {
		return fd, nil
	}
	done := ""
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c == "." {
			continue
		}
		done = path.Join(done, c)
		var st unix.Stat_t
		err := unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT):
			if err := unix.Mkdirat(fd, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, fmt.Errorf("mkdir %s: %w", done, err)
			}
		case err != nil:
			unix.Close(fd)
			return -1, fmt.Errorf("stat %s: %w", done, err)
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		case st.Mode&unix.S_IFMT == unix.S_IFLNK && !replace:
			unix.Close(fd)
			return -1, &errThroughSymlink{path: rel, link: done}
		case replace:
			if err := unix.Unlinkat(fd, c, 0); err != nil {
				unix.Close(fd)
				return -1, fmt.Errorf("replace %s: %w", done, err)
			}
			if err := unix.Mkdirat(fd, c, 0o755); err != nil {
				unix.Close(fd)
				return -1, fmt.Errorf("mkdir %s: %w", done, err)
			}
		default:
			unix.Close(fd)
			return -1, fmt.Errorf("%s: not a directory", done)
		}
		nfd, err := openBeneath(fd, c)
		unix.Close(fd)
		if errors.Is(err, unix.ELOOP) {
			return -1, &errThroughSymlink{path: rel, link: done}
		}
		if err != nil {
			return -1, fmt.Errorf("open %s: %w", done, err)
		}
		fd = nfd
	}
	return fd, nil
}

// removeAt removes name in the directory dirFD (whose path below the root
// is dirRel, already resolved without symlinks), recursively if it is a
// directory. A missing name is not an error.
func (t *tree) removeAt(dirFD int, dirRel, name string) error {
	err := unix.Unlinkat(dirFD, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("remove %s: %w", path.Join(dirRel, name), err)
	}
	// A directory: its parents were just resolved with no symlink, and
	// nothing else writes this tree, so the path names that directory;
	// os.RemoveAll never follows a symlink inside it.
	if err := os.RemoveAll(filepath.Join(t.dir, dirRel, name)); err != nil {
		return fmt.Errorf("remove %s: %w", path.Join(dirRel, name), err)
	}
	return nil
}

// removeAll removes a directory the store owns (temporary files); it
// never follows symlinks.
func removeAll(dir string) { os.RemoveAll(dir) }

// keepXattr reports whether an xattr is carried from an image into a
// template: user attributes and file capabilities. trusted.* (overlayfs
// keeps its whiteouts and redirects there) and security.* other than
// capabilities are dropped, so a layer cannot forge overlay metadata.
func keepXattr(name string) bool {
	return strings.HasPrefix(name, "user.") || name == "security.capability"
}

// opaqueXattr marks an overlay directory that hides lower layers' content.
const opaqueXattr = "trusted.overlay.opaque"

// isOpaque reports whether the directory fd carries the opaque mark.
func isOpaque(fd int) bool {
	buf := make([]byte, 4)
	n, err := unix.Fgetxattr(fd, opaqueXattr, buf)
	return err == nil && n == 1 && buf[0] == 'y'
}

// xattrs reads the kept xattrs of path (not following a final symlink).
func xattrs(p string) (map[string][]byte, error) {
	sz, err := unix.Llistxattr(p, nil)
	if err != nil || sz == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			err = nil
		}
		return nil, err
	}
	buf := make([]byte, sz)
	sz, err = unix.Llistxattr(p, buf)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00") {
		if name == "" || !keepXattr(name) {
			continue
		}
		vsz, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			continue
		}
		v := make([]byte, vsz)
		if vsz, err = unix.Lgetxattr(p, name, v); err != nil {
			continue
		}
		out[name] = v[:vsz]
	}
	return out, nil
}
