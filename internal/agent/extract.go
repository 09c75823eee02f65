package agent

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// handleExtract is POST /files/tar?path=DIR[&owner=USER[:GROUP]]: the
// tar in the body is unpacked below DIR, inside the sandbox, which is how a
// template build's COPY and ADD write files (docs/templates.md). It works
// in any image, shell or not. Entries keep their mode, times and (unless
// owner is given) their owner; missing parent directories are made 0755,
// owned like the entries; an existing directory is left as it is; any
// other existing path is replaced. Names climbing out of DIR are refused.
// The answer is {"files": N}.
func (s *Server) handleExtract(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	dir := q.Get("path")
	if !filepath.IsAbs(dir) {
		writeErr(w, fmt.Errorf("path %q: must be absolute: %w", dir, errInvalidPath))
		return
	}
	uid, gid := -1, -1
	if o := q.Get("owner"); o != "" {
		acct, err := s.lookupAccount(o)
		if err != nil {
			writeErr(w, fmt.Errorf("owner %q: %v: %w", o, err, errInvalid))
			return
		}
		uid, gid = int(acct.uid), int(acct.gid)
	}
	n, err := extractTar(r.Body, filepath.Clean(dir), uid, gid)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"files": n})
}

// extractTar unpacks r below dir; uid and gid, when not -1, own every
// entry and every directory made.
func extractTar(r io.Reader, dir string, uid, gid int) (int, error) {
	tr := tar.NewReader(r)
	n := 0
	owner := func(h *tar.Header) (int, int) {
		if uid >= 0 {
			return uid, gid
		}
		return h.Uid, h.Gid
	}
	type dirTime struct {
		path string
		t    time.Time
	}
	var dirTimes []dirTime
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("tar: %v: %w", err, errInvalid)
		}
		for _, el := range strings.Split(hdr.Name, "/") {
			if el == ".." {
				return n, fmt.Errorf("tar entry %q climbs out of %s: %w", hdr.Name, dir, errInvalidPath)
			}
		}
		rel := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		target := filepath.Join(dir, rel)
		u, g := owner(hdr)
		if err := mkdirParents(filepath.Dir(target), u, g); err != nil {
			return n, err
		}
		mode := os.FileMode(hdr.Mode & 0o777)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if fi, err := os.Lstat(target); err == nil && fi.IsDir() {
				continue
			} else if err == nil {
				os.RemoveAll(target)
			}
			if err := os.Mkdir(target, 0o700); err != nil {
				return n, fmt.Errorf("mkdir %s: %w", target, err)
			}
			dirTimes = append(dirTimes, dirTime{target, hdr.ModTime})
		case tar.TypeReg, tar.TypeRegA:
			if err := replaceable(target); err != nil {
				return n, err
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return n, fmt.Errorf("create %s: %w", target, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return n, fmt.Errorf("write %s: %w", target, err)
			}
		case tar.TypeSymlink:
			if err := replaceable(target); err != nil {
				return n, err
			}
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return n, fmt.Errorf("symlink %s: %w", target, err)
			}
			if err := os.Lchown(target, u, g); err != nil {
				return n, fmt.Errorf("chown %s: %w", target, err)
			}
			n++
			continue
		case tar.TypeLink:
			if err := replaceable(target); err != nil {
				return n, err
			}
			src := filepath.Join(dir, strings.TrimPrefix(path.Clean("/"+hdr.Linkname), "/"))
			if err := os.Link(src, target); err != nil {
				return n, fmt.Errorf("link %s: %w", target, err)
			}
			n++
			continue
		default:
			continue // devices and the like are not written
		}
		if err := os.Lchown(target, u, g); err != nil {
			return n, fmt.Errorf("chown %s: %w", target, err)
		}
		// chmod after chown: chown clears setuid bits.
		if err := unix.Chmod(target, uint32(mode)|uint32(hdr.Mode&0o7000)); err != nil {
			return n, fmt.Errorf("chmod %s: %w", target, err)
		}
		if hdr.Typeflag != tar.TypeDir {
			os.Chtimes(target, hdr.ModTime, hdr.ModTime)
		}
		n++
	}
	for i := len(dirTimes) - 1; i >= 0; i-- {
		os.Chtimes(dirTimes[i].path, dirTimes[i].t, dirTimes[i].t)
	}
	return n, nil
}

// mkdirParents makes dir and its missing parents, 0755, owned by uid:gid.
func mkdirParents(dir string, uid, gid int) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory: %w", dir, errInvalidPath)
		}
		return nil
	}
	if err := mkdirParents(filepath.Dir(dir), uid, gid); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	os.Chmod(dir, 0o755)
	return os.Lchown(dir, uid, gid)
}

// replaceable removes what is at target unless it is a directory holding
// something (a file may not replace a directory tree).
func replaceable(target string) error {
	fi, err := os.Lstat(target)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", target, err)
	}
	if fi.IsDir() {
		if err := os.Remove(target); err != nil {
			return fmt.Errorf("%s is a directory: %w", target, errInvalidPath)
		}
		return nil
	}
	return os.Remove(target)
}
