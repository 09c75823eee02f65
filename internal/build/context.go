package build

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Context is an uploaded build context: a tar spooled to a local file
// and indexed, so COPY and ADD can read any file in any order. Nothing in
// it is ever written to the host's filesystem as a file tree: it only
// travels, as tar streams, into the build sandbox.
type Context struct {
	f       *os.File
	entries map[string]*entry // by cleaned relative path, "." for the root
	names   []string          // sorted
}

type entry struct {
	hdr    tar.Header
	offset int64  // of the data, for regular files
	sum    string // sha256 of the data
}

// OpenContext indexes the tar at p (which it keeps open until Close). An
// entry climbing out of the context (a ".." element) is an error.
func OpenContext(p string) (*Context, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	c := &Context{f: f, entries: map[string]*entry{".": {hdr: tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}}}}
	if err := c.index(); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// EmptyContext is the context of a build that uploaded none.
func EmptyContext() *Context {
	return &Context{entries: map[string]*entry{".": {hdr: tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}}}, names: []string{"."}}
}

// Close releases the spooled file.
func (c *Context) Close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}

// countingReader tracks the offset tar.Reader has consumed.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *Context) index() error {
	cr := &countingReader{r: c.f}
	tr := tar.NewReader(cr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &ContextError{Msg: fmt.Sprintf("the build context is not a valid tar: %v", err)}
		}
		rel, err := cleanRel(hdr.Name)
		if err != nil {
			return err
		}
		e := &entry{hdr: *hdr}
		e.hdr.Name = rel
		if hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeRegA {
			e.hdr.Typeflag = tar.TypeReg
			e.offset = cr.n
			h := sha256.New()
			if _, err := io.Copy(h, tr); err != nil {
				return &ContextError{Msg: fmt.Sprintf("the build context is not a valid tar: %v", err)}
			}
			e.sum = hex.EncodeToString(h.Sum(nil))
		}
		// Implicit parent directories.
		for d := path.Dir(rel); d != "." && c.entries[d] == nil; d = path.Dir(d) {
			c.entries[d] = &entry{hdr: tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: hdr.ModTime}}
		}
		c.entries[rel] = e
	}
	for n := range c.entries {
		c.names = append(c.names, n)
	}
	sort.Strings(c.names)
	return nil
}

// ContextError is a COPY or ADD the context cannot satisfy, or a context
// that is not a tar.
type ContextError struct{ Msg string }

func (e *ContextError) Error() string { return e.Msg }

// Unwrap makes a ContextError an invalid argument.
func (e *ContextError) Unwrap() error { return sandbox.ErrInvalidArgument }

func cleanRel(name string) (string, error) {
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", &ContextError{Msg: fmt.Sprintf("build context entry %q climbs out of the context", name)}
		}
	}
	rel := strings.TrimPrefix(path.Clean("/"+name), "/")
	if rel == "" {
		rel = "."
	}
	return rel, nil
}

// match returns the context paths a COPY source names: the path itself,
// or every path matching it when it has wildcards (path.Match per the
// whole relative path, as Docker).
func (c *Context) match(src string) ([]string, error) {
	rel, err := cleanRel(src)
	if err != nil {
		return nil, &ContextError{Msg: fmt.Sprintf("source %q is outside the build context", src)}
	}
	if !strings.ContainsAny(rel, "*?[") {
		if c.entries[rel] == nil {
			return nil, &ContextError{Msg: fmt.Sprintf("%q: not found in the build context", src)}
		}
		return []string{rel}, nil
	}
	if _, err := path.Match(rel, ""); err != nil {
		return nil, &ContextError{Msg: fmt.Sprintf("source pattern %q: %v", src, err)}
	}
	var out []string
	for _, n := range c.names {
		if ok, _ := path.Match(rel, n); ok {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, &ContextError{Msg: fmt.Sprintf("%q: no file in the build context matches", src)}
	}
	return out, nil
}

// below lists rel and every path under it, sorted.
func (c *Context) below(rel string) []string {
	if rel == "." {
		return append([]string(nil), c.names...)
	}
	var out []string
	for _, n := range c.names {
		if n == rel || strings.HasPrefix(n, rel+"/") {
			out = append(out, n)
		}
	}
	return out
}

// copyItem is one context entry and where it lands in the sandbox.
type copyItem struct {
	src string // context path
	dst string // absolute path in the sandbox
	// unpackTo is where ADD unpacks src if it is an archive: the
	// destination itself (only sources named by the instruction qualify,
	// not files inside a copied directory).
	unpackTo string
}

// plan resolves a COPY or ADD: sources (relative to the context) into
// dest (absolute; a trailing slash, several sources or a wildcard make it
// a directory, as does isDir reporting an existing directory there).
func (c *Context) plan(sources []string, dest string, isDir func(string) bool) ([]copyItem, error) {
	var matched []string
	wild := false
	for _, s := range sources {
		ms, err := c.match(s)
		if err != nil {
			return nil, err
		}
		wild = wild || strings.ContainsAny(s, "*?[")
		matched = append(matched, ms...)
	}
	destDir := strings.HasSuffix(dest, "/") || len(sources) > 1 || wild
	dest = path.Clean(dest)
	if !destDir && isDir != nil && isDir(dest) {
		destDir = true
	}
	var items []copyItem
	for _, m := range matched {
		e := c.entries[m]
		if e.hdr.Typeflag == tar.TypeDir {
			// A directory's contents are copied, not the directory itself.
			for _, n := range c.below(m) {
				if n == m {
					continue
				}
				r := strings.TrimPrefix(n, m+"/")
				if m == "." {
					r = n
				}
				items = append(items, copyItem{src: n, dst: path.Join(dest, r)})
			}
			continue
		}
		dst := dest
		if destDir {
			dst = path.Join(dest, path.Base(m))
		}
		items = append(items, copyItem{src: m, dst: dst, unpackTo: dest})
	}
	return items, nil
}

// hash is the content hash of what items copy: context names, types,
// modes, link targets and data digests — what the layer cache keys COPY
// and ADD on (the destination is in the step's own key).
func (c *Context) hash(items []copyItem) string {
	h := sha256.New()
	for _, it := range items {
		e := c.entries[it.src]
		fmt.Fprintf(h, "%s\x00%c\x00%o\x00%s\x00%s\n", it.src, e.hdr.Typeflag, e.hdr.Mode&0o7777, e.hdr.Linkname, e.sum)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// open returns the data of a regular file entry.
func (c *Context) open(e *entry) io.Reader {
	return io.NewSectionReader(c.f, e.offset, e.hdr.Size)
}

// writeCopy writes items as a tar rooted at "/" (names relative to it),
// owned by root (the agent applies --chown), with chmod when set.
func (c *Context) writeCopy(w io.Writer, items []copyItem, chmod *uint32, unpack bool) error {
	tw := tar.NewWriter(w)
	for _, it := range items {
		e := c.entries[it.src]
		name := strings.TrimPrefix(it.dst, "/")
		if unpack && it.unpackTo != "" && e.hdr.Typeflag == tar.TypeReg {
			ok, err := c.writeArchive(tw, e, strings.TrimPrefix(it.unpackTo, "/"))
			if err != nil {
				return err
			}
			if ok {
				continue
			}
		}
		hdr := tar.Header{Name: name, Typeflag: e.hdr.Typeflag, Mode: e.hdr.Mode & 0o7777, ModTime: e.hdr.ModTime,
			Linkname: e.hdr.Linkname, Format: tar.FormatPAX}
		if chmod != nil {
			hdr.Mode = int64(*chmod)
		}
		switch e.hdr.Typeflag {
		case tar.TypeReg:
			hdr.Size = e.hdr.Size
		case tar.TypeDir:
			hdr.Name += "/"
		case tar.TypeSymlink:
		case tar.TypeLink:
			// A hard link in the context becomes a copy: its target may
			// not be copied by this instruction.
			t := c.entries[e.hdr.Linkname]
			if t == nil {
				if lt, err := cleanRel(e.hdr.Linkname); err == nil {
					t = c.entries[lt]
				}
			}
			if t == nil || t.hdr.Typeflag != tar.TypeReg {
				continue
			}
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeReg, "", t.hdr.Size
			e = t
		default:
			continue
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, c.open(e)); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// writeArchive, for ADD, re-roots a local tar (plain, gzip, bzip2 or zstd)
// found at e into dir name. ok is false when e is not an archive: ADD then
// copies it as a file.
func (c *Context) writeArchive(tw *tar.Writer, e *entry, name string) (ok bool, err error) {
	br := bufio.NewReader(c.open(e))
	magic, _ := br.Peek(262)
	var r io.Reader
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return false, nil
		}
		r = zr
	case bytes.HasPrefix(magic, []byte("BZh")):
		r = bzip2.NewReader(br)
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return false, nil
		}
		defer zr.Close()
		r = zr
	case len(magic) >= 262 && string(magic[257:262]) == "ustar":
		r = br
	default:
		return false, nil
	}
	tr := tar.NewReader(r)
	first := true
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			if first {
				return false, nil // not a tar after all
			}
			return false, &ContextError{Msg: fmt.Sprintf("ADD %s: %v", e.hdr.Name, err)}
		}
		first = false
		rel, err := cleanRel(hdr.Name)
		if err != nil {
			return false, &ContextError{Msg: fmt.Sprintf("ADD %s: entry %q climbs out of the destination", e.hdr.Name, hdr.Name)}
		}
		out := *hdr
		out.Name = path.Join(name, rel)
		if hdr.Typeflag == tar.TypeDir {
			out.Name += "/"
		}
		if hdr.Typeflag == tar.TypeLink {
			lr, err := cleanRel(hdr.Linkname)
			if err != nil {
				return false, &ContextError{Msg: fmt.Sprintf("ADD %s: link %q climbs out", e.hdr.Name, hdr.Linkname)}
			}
			out.Linkname = path.Join(name, lr)
		}
		out.Format, out.PAXRecords, out.Xattrs = tar.FormatPAX, nil, nil
		if out.ModTime.IsZero() {
			out.ModTime = time.Unix(0, 0)
		}
		if err := tw.WriteHeader(&out); err != nil {
			return false, err
		}
		if hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeRegA {
			if _, err := io.Copy(tw, tr); err != nil {
				return false, err
			}
		}
	}
}
