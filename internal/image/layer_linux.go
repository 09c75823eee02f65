package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// storeLayer unpacks the uncompressed layer tar r into the store under the
// SHA-256 of its bytes, and checks that digest against want when want is
// set (an image config's diff ID). check, when set, runs once the tar is
// read and before the layer is stored: it verifies what only the caller can
// (the compressed blob's digest). A layer already stored is kept as it is.
func (s *Store) storeLayer(ctx context.Context, r io.Reader, want string, b *budget, check func() error) (string, error) {
	tmp, err := os.MkdirTemp(filepath.Join(s.cfg.Root, "tmp"), "layer-")
	if err != nil {
		return "", fmt.Errorf("image store: %w", err)
	}
	defer removeAll(tmp)
	fsDir := filepath.Join(tmp, "fs")
	if err := os.Mkdir(fsDir, 0o755); err != nil {
		return "", fmt.Errorf("image store: %w", err)
	}
	h := sha256.New()
	tee := io.TeeReader(r, h)
	links, err := extract(ctx, tee, fsDir, b)
	if err != nil {
		return "", err
	}
	// The tar's end-of-archive padding is part of the digest.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return "", errorf(ErrInvalid, "layer: %v", err)
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if want != "" && got != want {
		return "", errorf(ErrDigest, "layer unpacks to %s, the image says %s", got, want)
	}
	if check != nil {
		if err := check(); err != nil {
			return "", err
		}
	}
	if err := writeLinks(tmp, links); err != nil {
		return "", fmt.Errorf("image store: %w", err)
	}
	dir, err := s.layerDir(got)
	if err != nil {
		return "", err
	}
	if want == "" {
		defer s.lock(got)()
	}
	if s.Has(got) {
		return got, nil
	}
	os.RemoveAll(dir) // a layer without fs/ is a removal a crash interrupted
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("image store: %w", err)
	}
	return got, nil
}

// Flatten writes at dest (which must not exist) the root filesystem of a
// stack: a copy of base (a plain directory tree on this filesystem, e.g.
// another template version; empty for none), then each layer in order,
// whiteouts removing and opaque directories hiding what lies below. Files
// are hard links to base's and the layers' files; directories are new. It
// builds in a temporary sibling and renames it into place, so dest is
// either absent or complete.
func (s *Store) Flatten(ctx context.Context, dest, base string, layers []string) error {
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("flatten: %s exists", dest)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".flatten-")
	if err != nil {
		return fmt.Errorf("flatten: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			removeAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("flatten: %w", err)
	}
	t, err := openTree(tmp)
	if err != nil {
		return fmt.Errorf("flatten: %w", err)
	}
	defer t.close()
	dirTimes := map[string]time.Time{}
	if base != "" {
		if err := t.apply(ctx, base, false, dirTimes); err != nil {
			return fmt.Errorf("flatten: base %s: %w", base, err)
		}
	}
	for _, l := range layers {
		dir, err := s.layerDir(l)
		if err != nil {
			return err
		}
		if !s.Has(l) {
			return fmt.Errorf("flatten: layer %s is not stored: %w", l, ErrInvalid)
		}
		if err := t.apply(ctx, filepath.Join(dir, "fs"), true, dirTimes); err != nil {
			return fmt.Errorf("flatten: layer %s: %w", l, err)
		}
		links, err := readLinks(dir)
		if err != nil {
			return fmt.Errorf("flatten: layer %s: %w", l, err)
		}
		for _, ln := range links {
			if err := t.link(ln); err != nil {
				return fmt.Errorf("flatten: layer %s: %w", l, err)
			}
		}
	}
	if err := t.setDirTimes(dirTimes); err != nil {
		return fmt.Errorf("flatten: %w", err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("flatten: %w", err)
	}
	ok = true
	return nil
}

// apply lays the tree at src over t. With layer set, src is in the overlay
// format (0/0 character devices delete, opaque directories hide);
// otherwise it is a plain root filesystem whose devices are skipped.
func (t *tree) apply(ctx context.Context, src string, layer bool, dirTimes map[string]time.Time) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		parent, name := path.Dir(rel), path.Base(rel)
		pfd, err := t.mkdirAll(parent, true)
		if err != nil {
			return err
		}
		defer unix.Close(pfd)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR, unix.S_IFBLK:
			if layer && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
				return t.removeAt(pfd, parent, name)
			}
			return nil
		case unix.S_IFDIR:
			return t.applyDir(pfd, parent, name, p, &st, layer, dirTimes, rel)
		case unix.S_IFREG, unix.S_IFLNK, unix.S_IFIFO:
			if err := t.removeAt(pfd, parent, name); err != nil {
				return err
			}
			return unix.Linkat(unix.AT_FDCWD, p, pfd, name, 0)
		}
		return nil // sockets: nothing to keep
	})
}

// applyDir makes name in pfd a directory with src's owner, mode and kept
// xattrs; an opaque layer directory first empties what was there.
func (t *tree) applyDir(pfd int, parent, name, src string, st *unix.Stat_t, layer bool, dirTimes map[string]time.Time, rel string) error {
	var cur unix.Stat_t
	err := unix.Fstatat(pfd, name, &cur, unix.AT_SYMLINK_NOFOLLOW)
	exists := err == nil
	opaque := false
	if layer {
		if sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			opaque = isOpaque(sfd)
			unix.Close(sfd)
		}
	}
	if exists && (cur.Mode&unix.S_IFMT != unix.S_IFDIR || opaque) {
		if err := t.removeAt(pfd, parent, name); err != nil {
			return err
		}
		exists = false
	}
	fd, err := mkdirOpen(pfd, name, exists)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
		return err
	}
	xs, err := xattrs(src)
	if err != nil {
		return err
	}
	for k, v := range xs {
		if err := unix.Fsetxattr(fd, k, v, 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
			return fmt.Errorf("xattr %s: %w", k, err)
		}
	}
	dirTimes[rel] = time.Unix(st.Mtim.Unix())
	return nil
}

// link makes a cross-layer hard link once its target's layer is applied.
func (t *tree) link(ln crossLink) error {
	tfd, err := t.openDir(path.Dir(ln.Target))
	if err != nil {
		return fmt.Errorf("hard link %s → %s: %w", ln.Name, ln.Target, unsafeOr(ln.Target, err))
	}
	defer unix.Close(tfd)
	pfd, err := t.mkdirAll(path.Dir(ln.Name), true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := t.removeAt(pfd, path.Dir(ln.Name), path.Base(ln.Name)); err != nil {
		return err
	}
	if err := unix.Linkat(tfd, path.Base(ln.Target), pfd, path.Base(ln.Name), 0); err != nil {
		return fmt.Errorf("hard link %s → %s: %w", ln.Name, ln.Target, err)
	}
	return nil
}

// Size sums the sizes of the regular files under dir (each inode once).
func Size(dir string) int64 {
	var n int64
	seen := map[uint64]bool{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || seen[st.Ino] {
			return nil
		}
		seen[st.Ino] = true
		n += st.Size
		return nil
	})
	return n
}
