package platinum

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// PackContext writes the build context in dir as a tar to w, leaving out
// what dir's .dockerignore excludes (Docker's rules, with moby's own
// pattern matcher: "**", "!" exceptions, paths relative to dir). Symlinks
// are packed as symlinks, never followed; sockets and devices are skipped.
// The Dockerfile and .dockerignore themselves are packed unless ignored,
// as Docker does. It returns how many bytes of file data it packed.
func PackContext(dir string, w io.Writer) (int64, error) {
	var pm *patternmatcher.PatternMatcher
	if f, err := os.Open(filepath.Join(dir, ".dockerignore")); err == nil {
		patterns, err := ignorefile.ReadAll(f)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf(".dockerignore: %w", err)
		}
		if pm, err = patternmatcher.New(patterns); err != nil {
			return 0, fmt.Errorf(".dockerignore: %w", err)
		}
	} else if !os.IsNotExist(err) {
		return 0, err
	}
	tw := tar.NewWriter(w)
	var total int64
	parents := map[string]patternmatcher.MatchInfo{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if pm != nil {
			parent := parents[filepath.ToSlash(filepath.Dir(rel))]
			skip, info, err := pm.MatchesUsingParentResults(rel, parent)
			if err != nil {
				return fmt.Errorf(".dockerignore: %w", err)
			}
			if d.IsDir() {
				parents[rel] = info
			}
			if skip {
				// A directory is still walked when an exception ("!")
				// may bring back something inside it.
				if d.IsDir() && !pm.Exclusions() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.IsDir(), fi.Mode().IsRegular():
		default:
			return nil
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.Copy(tw, io.LimitReader(f, fi.Size()))
		total += n
		if err == nil && n != fi.Size() {
			err = fmt.Errorf("%s changed while being packed", rel)
		}
		return err
	})
	if err != nil {
		return total, fmt.Errorf("pack %s: %w", dir, err)
	}
	return total, tw.Close()
}
