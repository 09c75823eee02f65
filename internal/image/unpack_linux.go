package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// whiteoutPrefix marks a deletion in an OCI layer; whiteoutOpaque a
// directory whose lower content is hidden.
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// crossLink is a hard link whose target is in a lower layer: it can only
// be made when the layers are stacked (Flatten), so the layer records it
// in its linksFile.
type crossLink struct {
	Name   string `json:"name"`
	Target string `json:"target"`
}

// linksFile, next to a layer's fs directory, lists its crossLinks.
const linksFile = "links.json"

// cleanName turns a tar entry name into a path relative to the layer's
// root, refusing any ".." element: a name that climbs is an attack, not a
// path to guess at.
func cleanName(name string) (string, error) {
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", errorf(ErrUnsafe, "entry %q climbs out of the root filesystem", name)
		}
	}
	rel := strings.TrimPrefix(path.Clean("/"+name), "/")
	if rel == "" {
		rel = "."
	}
	return rel, nil
}

// extract unpacks one uncompressed layer tar into the empty directory dir
// in the overlay format, and returns the hard links whose targets are in
// lower layers. Device nodes are skipped (a sandbox's /dev is its
// runtime's); ownership, modes (setuid included), times and the kept
// xattrs (user.*, security.capability) are applied as the tar says.
func extract(ctx context.Context, r io.Reader, dir string, b *budget) ([]crossLink, error) {
	t, err := openTree(dir)
	if err != nil {
		return nil, err
	}
	defer t.close()
	tr := tar.NewReader(r)
	var links []crossLink
	dirTimes := map[string]time.Time{}
	skipped := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errorf(ErrInvalid, "layer tar: %v", err)
		}
		rel, err := cleanName(hdr.Name)
		if err != nil {
			return nil, err
		}
		if err := b.take(512); err != nil {
			return nil, err
		}
		parent, base := path.Dir(rel), path.Base(rel)
		if rel == "." {
			continue // the root keeps the mode a root filesystem needs
		}
		if strings.HasPrefix(base, whiteoutPrefix) {
			if err := t.whiteout(parent, base); err != nil {
				return nil, unsafeOr(rel, err)
			}
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeRegA, tar.TypeDir, tar.TypeSymlink, tar.TypeFifo, tar.TypeLink:
		case tar.TypeChar, tar.TypeBlock:
			skipped++
			continue
		default:
			continue // global headers, GNU extensions: nothing to write
		}
		pfd, err := t.mkdirAll(parent, false)
		if err != nil {
			return nil, unsafeOr(rel, err)
		}
		err = t.writeEntry(pfd, parent, base, hdr, tr, b)
		if err == errCrossLink {
			target, _ := cleanName(hdr.Linkname)
			links = append(links, crossLink{Name: rel, Target: target})
			err = nil
		}
		unix.Close(pfd)
		if err != nil {
			return nil, unsafeOr(rel, err)
		}
		if hdr.Typeflag == tar.TypeDir {
			dirTimes[rel] = hdr.ModTime
		}
	}
	// Writing into a directory moved its mtime: set them last, deepest
	// first.
	if err := t.setDirTimes(dirTimes); err != nil {
		return nil, err
	}
	_ = skipped
	return links, nil
}

// unsafeOr turns a path through a symlink into ErrUnsafe and passes other
// errors on (already categorised ones unchanged).
func unsafeOr(rel string, err error) error {
	var ts *errThroughSymlink
	if errors.As(err, &ts) {
		return errorf(ErrUnsafe, "entry %q would be written through the symlink %q, which may point outside the root filesystem", rel, ts.link)
	}
	var ke *kindError
	if errors.As(err, &ke) {
		return err
	}
	return fmt.Errorf("unpack %s: %w", rel, err)
}

// errCrossLink reports a hard link to a file in a lower layer.
var errCrossLink = errors.New("hard link to a lower layer")

// whiteout records the OCI whiteout base (".wh.name" or the opaque marker)
// found in directory parent.
func (t *tree) whiteout(parent, base string) error {
	pfd, err := t.mkdirAll(parent, false)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if base == whiteoutOpaque {
		return unix.Fsetxattr(pfd, opaqueXattr, []byte("y"), 0)
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || strings.HasPrefix(name, whiteoutPrefix) || name == "." || name == ".." {
		return nil // AUFS bookkeeping (.wh..wh.plnk, …): nothing to hide
	}
	if err := t.removeAt(pfd, parent, name); err != nil {
		return err
	}
	return unix.Mknodat(pfd, name, unix.S_IFCHR, 0)
}

// writeEntry writes one non-whiteout tar entry named base into the
// directory pfd (at parent below the root).
func (t *tree) writeEntry(pfd int, parent, base string, hdr *tar.Header, r io.Reader, b *budget) error {
	var st unix.Stat_t
	exists := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	isDir := exists && st.Mode&unix.S_IFMT == unix.S_IFDIR
	if hdr.Typeflag == tar.TypeDir {
		if exists && !isDir {
			if err := unix.Unlinkat(pfd, base, 0); err != nil {
				return err
			}
			exists = false
		}
		fd, err := mkdirOpen(pfd, base, exists)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return applyMeta(fd, hdr, false)
	}
	// Anything else replaces what the layer had there (a tar may name a
	// path twice; the last entry wins).
	if exists {
		if err := t.removeAt(pfd, parent, base); err != nil {
			return err
		}
	}
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return err
		}
		if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		return setTimesAt(pfd, base, hdr.AccessTime, hdr.ModTime)
	case tar.TypeLink:
		target, err := cleanName(hdr.Linkname)
		if err != nil {
			return err
		}
		tfd, err := t.openDir(path.Dir(target))
		if errors.Is(err, unix.ENOENT) {
			return errCrossLink
		}
		if errors.Is(err, unix.ELOOP) {
			return &errThroughSymlink{path: target, link: path.Dir(target)}
		}
		if err != nil {
			return err
		}
		defer unix.Close(tfd)
		var tst unix.Stat_t
		if err := unix.Fstatat(tfd, path.Base(target), &tst, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			return errCrossLink
		} else if err != nil {
			return err
		}
		if tst.Mode&unix.S_IFMT == unix.S_IFDIR {
			return errorf(ErrInvalid, "hard link %q names the directory %q", hdr.Name, hdr.Linkname)
		}
		return unix.Linkat(tfd, path.Base(target), pfd, base, 0)
	case tar.TypeFifo:
		if err := unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0); err != nil {
			return err
		}
		fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return applyMeta(fd, hdr, true)
	}
	// A regular file.
	if err := b.take(hdr.Size); err != nil {
		return err
	}
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	if n, err := io.Copy(f, io.LimitReader(r, hdr.Size)); err != nil {
		return err
	} else if n != hdr.Size {
		return errorf(ErrInvalid, "entry %q is truncated", hdr.Name)
	}
	return applyMeta(fd, hdr, true)
}

// applyMeta sets owner, mode, kept xattrs and (for non-directories)
// times on an open file, in the order that keeps them: chown clears
// setuid bits and file capabilities, so it comes first.
func applyMeta(fd int, hdr *tar.Header, times bool) error {
	if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, tarMode(hdr)); err != nil {
		return err
	}
	keys := make([]string, 0, len(hdr.PAXRecords))
	for k := range hdr.PAXRecords {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok || !keepXattr(name) {
			continue
		}
		if err := unix.Fsetxattr(fd, name, []byte(hdr.PAXRecords[k]), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
			return fmt.Errorf("xattr %s: %w", name, err)
		}
	}
	if !times {
		return nil
	}
	return unix.Futimes(fd, []unix.Timeval{unix.NsecToTimeval(atime(hdr).UnixNano()), unix.NsecToTimeval(hdr.ModTime.UnixNano())})
}

// tarMode is the header's permission bits with setuid, setgid and sticky.
func tarMode(hdr *tar.Header) uint32 {
	return uint32(hdr.Mode) & 0o7777
}

func atime(hdr *tar.Header) time.Time {
	if hdr.AccessTime.IsZero() {
		return hdr.ModTime
	}
	return hdr.AccessTime
}

func setTimesAt(dirFD int, name string, at, mt time.Time) error {
	if at.IsZero() {
		at = mt
	}
	ts := []unix.Timespec{unix.NsecToTimespec(at.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
	return unix.UtimesNanoAt(dirFD, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// setDirTimes sets directories' modification times, deepest first.
func (t *tree) setDirTimes(times map[string]time.Time) error {
	dirs := make([]string, 0, len(times))
	for d := range times {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	for _, d := range dirs {
		pfd, err := t.openDir(path.Dir(d))
		if err != nil {
			continue // replaced by a later entry
		}
		setTimesAt(pfd, path.Base(d), times[d], times[d])
		unix.Close(pfd)
	}
	return nil
}

// writeLinks records a layer's cross-layer hard links next to its fs dir.
func writeLinks(layerDir string, links []crossLink) error {
	if len(links) == 0 {
		return nil
	}
	b, err := json.Marshal(links)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(layerDir, linksFile), b, 0o600)
}

func readLinks(layerDir string) ([]crossLink, error) {
	b, err := os.ReadFile(filepath.Join(layerDir, linksFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var links []crossLink
	if err := json.Unmarshal(b, &links); err != nil {
		return nil, fmt.Errorf("%s: %w", linksFile, err)
	}
	return links, nil
}
