package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// ImportDir stores the overlay upper directory upper — what a build left
// on its sandbox's disk — as a layer, and returns its diff ID. The tree is
// turned into an OCI layer tar (whiteouts and opaque markers as .wh.
// entries) and unpacked by the same code as a pulled layer, so the digest
// is that tar's and the checks are the same. Paths in exclude (relative,
// e.g. ".pt" or "etc/hostname") are left out with everything below them.
// Nothing under upper is followed: it was written by untrusted code.
func (s *Store) ImportDir(ctx context.Context, upper string, exclude []string) (string, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := writeDiffTar(ctx, upper, exclude, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	id, err := s.storeLayer(ctx, pr, "", &budget{left: s.cfg.MaxBytes}, nil)
	pr.CloseWithError(errors.New("import ended"))
	werr := <-done
	if err != nil {
		return "", err
	}
	if werr != nil {
		return "", fmt.Errorf("image: diff of %s: %w", upper, werr)
	}
	return id, nil
}

// writeDiffTar writes the overlay upper dir root as an OCI layer tar.
func writeDiffTar(ctx context.Context, root string, exclude []string, w io.Writer) error {
	skip := map[string]bool{}
	for _, e := range exclude {
		skip[path.Clean(e)] = true
	}
	tw := tar.NewWriter(w)
	seen := map[uint64]string{} // inode → first name, for hard links
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skip[rel] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		hdr := &tar.Header{
			Name: rel, Uid: int(st.Uid), Gid: int(st.Gid), Mode: int64(st.Mode & 0o7777),
			ModTime: time.Unix(st.Mtim.Unix()), Format: tar.FormatPAX,
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if st.Rdev != 0 {
				return nil
			}
			return tw.WriteHeader(&tar.Header{Name: path.Join(path.Dir(rel), whiteoutPrefix+path.Base(rel)),
				Typeflag: tar.TypeReg, ModTime: hdr.ModTime, Format: tar.FormatPAX})
		case unix.S_IFDIR:
			hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
			if err := addXattrs(hdr, p); err != nil {
				return err
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			opaque := isOpaque(fd)
			unix.Close(fd)
			if opaque {
				return tw.WriteHeader(&tar.Header{Name: rel + "/" + whiteoutOpaque, Typeflag: tar.TypeReg,
					ModTime: hdr.ModTime, Format: tar.FormatPAX})
			}
			return nil
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
			return tw.WriteHeader(hdr)
		case unix.S_IFIFO:
			hdr.Typeflag = tar.TypeFifo
			return tw.WriteHeader(hdr)
		case unix.S_IFREG:
		default:
			return nil // sockets, block devices
		}
		if first, ok := seen[st.Ino]; ok && st.Nlink > 1 {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			return tw.WriteHeader(hdr)
		}
		seen[st.Ino] = rel
		if err := addXattrs(hdr, p); err != nil {
			return err
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		n, err := io.Copy(tw, io.LimitReader(f, st.Size))
		if err == nil && n != st.Size {
			err = fmt.Errorf("%s changed size while being read", rel)
		}
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// addXattrs copies path's kept xattrs into the header's PAX records.
func addXattrs(hdr *tar.Header, p string) error {
	xs, err := xattrs(p)
	if err != nil {
		return err
	}
	for k, v := range xs {
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords["SCHILY.xattr."+k] = string(v)
	}
	return nil
}
