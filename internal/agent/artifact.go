package agent

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// KindHeader is the response header of GET /artifact saying what the body
// is: "file" (the file's bytes) or "directory" (a tar stream).
const KindHeader = "X-Pt-Kind"

// handleArtifact streams a file's bytes, or a directory as a tar, for an
// artifact export. Paths resolve like /files (relative to the user's home,
// no ".." elements); the agent runs inside the sandbox's mount namespace,
// so a symlink can only ever resolve within the sandbox. Inside a
// directory, symlinks are stored as symlinks (never followed) and
// sockets, devices and FIFOs are skipped. Entry names are relative to the
// directory ("a.txt", "sub/", "sub/b.txt").
//
// A failure after the first byte aborts the response, so the host sees a
// broken stream and stores nothing.
func (s *Server) handleArtifact(w http.ResponseWriter, r *http.Request) {
	p, err := s.filesPath(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	fi, err := os.Stat(p)
	if err != nil {
		writeErr(w, fmt.Errorf("stat %s: %w", p, err))
		return
	}
	switch {
	case fi.Mode().IsRegular():
		f, err := os.Open(p)
		if err != nil {
			writeErr(w, fmt.Errorf("open %s: %w", p, err))
			return
		}
		defer f.Close()
		w.Header().Set(KindHeader, "file")
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
		if _, err := io.CopyN(w, f, fi.Size()); err != nil {
			panic(http.ErrAbortHandler)
		}
	case fi.IsDir():
		root, err := filepath.EvalSymlinks(p)
		if err != nil {
			writeErr(w, fmt.Errorf("resolve %s: %w", p, err))
			return
		}
		w.Header().Set(KindHeader, "directory")
		w.Header().Set("Content-Type", "application/x-tar")
		if err := writeTar(w, root); err != nil {
			s.log.Warn("artifact tar", "path", root, "err", err)
			panic(http.ErrAbortHandler)
		}
	default:
		writeErr(w, fmt.Errorf("%s: not a regular file or directory: %w", p, errInvalid))
	}
}

// namedInfo gives archive/tar the owner's names from passwd.go
// (tar.FileInfoNames), so a header never goes through os/user, which calls
// the C library in a cgo build (see passwd.go).
type namedInfo struct{ fs.FileInfo }

// Uname implements tar.FileInfoNames.
func (n namedInfo) Uname() (string, error) {
	if st, ok := n.Sys().(*syscall.Stat_t); ok {
		if e, err := lookupPasswd(strconv.FormatUint(uint64(st.Uid), 10), true); err == nil {
			return e.name, nil
		}
	}
	return "", nil
}

// Gname implements tar.FileInfoNames.
func (n namedInfo) Gname() (string, error) {
	if st, ok := n.Sys().(*syscall.Stat_t); ok {
		if e, err := lookupGroup(strconv.FormatUint(uint64(st.Gid), 10), true); err == nil {
			return e.name, nil
		}
	}
	return "", nil
}

// writeTar writes the tree under root as a tar stream.
func writeTar(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		case info.IsDir(), info.Mode().IsRegular():
		default:
			return nil // sockets, devices, FIFOs
		}
		hdr, err := tar.FileInfoHeader(namedInfo{info}, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
