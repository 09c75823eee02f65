package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxCp is `pt sandbox cp SRC DST`: copy one file into or out of a
// sandbox. The sandbox side is written ID:PATH; "-" is stdin or stdout.
// Content streams both ways, so files of any size work.
type sandboxCp struct{ app *app }

const sandboxCpSynopsis = `pt sandbox cp LOCAL|- ID:PATH     (upload)
       pt sandbox cp ID:PATH LOCAL|-     (download)`

// remote splits "ID:PATH". A local path containing ':' can be written
// with a directory part (./a:b) to keep it local.
func remote(arg string) (id, p string, ok bool) {
	id, p, ok = strings.Cut(arg, ":")
	if !ok || id == "" || strings.ContainsAny(id, `/\`) {
		return "", "", false
	}
	return id, p, true
}

// bind binds the flags; the returned run copies the file.
func (c *sandboxCp) bind(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		usage := in.usage
		if len(pos) != 2 {
			return usageErr(usage, "want a source and a destination")
		}
		src, dst := pos[0], pos[1]
		srcID, srcPath, srcRemote := remote(src)
		dstID, dstPath, dstRemote := remote(dst)
		switch {
		case srcRemote && dstRemote:
			return usageErr(usage, "copying between sandboxes is not supported; one side must be local")
		case !srcRemote && !dstRemote:
			return usageErr(usage, "one side must be in a sandbox, written ID:PATH")
		case srcRemote && srcPath == "":
			return usageErr(usage, "%q names no file in the sandbox", src)
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		if dstRemote {
			return c.upload(ctx, cl, src, dstID, dstPath, usage)
		}
		return c.download(ctx, cl, srcID, srcPath, dst)
	}
}

func (c *sandboxCp) upload(ctx context.Context, cl *platinum.Client, src, id, dst, usage string) error {
	if dst == "" || strings.HasSuffix(dst, "/") {
		if src == "-" {
			return usageErr(usage, "name the file to write in the sandbox, e.g. %s:/tmp/input", id)
		}
		dst += filepath.Base(src)
	}
	var r io.Reader = c.app.stdin
	if src != "-" {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return withHint(fmt.Errorf("%s is a directory", src), "pt copies single files; archive the directory first, e.g. tar c DIR | pt sandbox exec ID --stdin -- tar x")
		}
		r = f
	}
	return cl.Sandboxes.Upload(ctx, id, dst, r)
}

func (c *sandboxCp) download(ctx context.Context, cl *platinum.Client, id, src, dst string) error {
	rc, err := cl.Sandboxes.Download(ctx, id, src)
	if errors.Is(err, platinum.ErrIsDirectory) {
		return withHint(fmt.Errorf("%s in %s is a directory", src, id), fmt.Sprintf("pt copies single files; list it with `pt sandbox exec %s -- ls -la %s`", id, src))
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	if dst == "-" {
		_, err := io.Copy(c.app.stdout, rc)
		return err
	}
	if st, err := os.Stat(dst); err == nil && st.IsDir() {
		dst = filepath.Join(dst, path.Base(src))
	}
	// Write beside the destination and rename, so a failed copy never
	// leaves a truncated file behind or clobbers the old one.
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".pt-cp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, rc)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return fmt.Errorf("copy %s:%s to %s: %w", id, src, dst, err)
	}
	return os.Rename(tmp.Name(), dst)
}
