package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// artifactCreate is `pt artifact create SANDBOX PATH`.
type artifactCreate struct{ app *app }

const artifactCreateSynopsis = "pt artifact create SANDBOX PATH [--name NAME] [--json]"

// bind binds the flags; the returned run exports PATH (a file, or a
// directory as a tar) and prints the new artifact's ID, or the artifact as
// JSON.
func (c *artifactCreate) bind(fs *flag.FlagSet) runFunc {
	name := fs.String("name", "", "download file name (default: the path's base name, plus .tar for a directory)")
	asJSON := fs.Bool("json", false, "print the artifact as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 2 {
			return in.usageErr("want a sandbox ID and a path")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		a, err := cl.Artifacts.Create(ctx, pos[0], platinum.ArtifactCreate{Path: pos[1], Name: *name})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, a)
		}
		fmt.Fprintln(c.app.stdout, a.ID)
		return nil
	}
}

// artifactList is `pt artifact list`.
type artifactList struct{ app *app }

const artifactListSynopsis = "pt artifact list [--sandbox ID] [--json]"

// bind binds the flags; the returned run prints the org's artifacts, newest
// first.
func (c *artifactList) bind(fs *flag.FlagSet) runFunc {
	sbx := fs.String("sandbox", "", "only this sandbox's artifacts")
	asJSON := fs.Bool("json", false, `print {"rows": [...]} as JSON`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) > 0 {
			return in.usageErr("unexpected argument %q", pos[0])
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		rows, err := cl.Artifacts.List(ctx, *sbx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, struct {
				Rows []platinum.Artifact `json:"rows"`
			}{rows})
		}
		tw := table(c.app.stdout)
		fmt.Fprintln(tw, "ID\tSANDBOX\tKIND\tSIZE\tNAME\tCREATED")
		for _, a := range rows {
			fmt.Fprintln(tw, strings.Join([]string{a.ID, a.SandboxID, a.Kind, formatBytes(a.SizeBytes), a.Name, formatTime(a.CreatedAt)}, "\t"))
		}
		return tw.Flush()
	}
}

// artifactGet is `pt artifact get ID`.
type artifactGet struct{ app *app }

const artifactGetSynopsis = "pt artifact get ID [--json]"

// bind binds the flags; the returned run prints one artifact.
func (c *artifactGet) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the artifact as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 {
			return in.usageErr("want one artifact ID")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		a, err := cl.Artifacts.Get(ctx, pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, a)
		}
		tw := table(c.app.stdout)
		for _, kv := range [][2]string{{"id", a.ID}, {"sandbox", a.SandboxID}, {"name", a.Name}, {"path", a.Path},
			{"kind", a.Kind}, {"content type", a.ContentType}, {"size", formatBytes(a.SizeBytes)}, {"sha256", a.SHA256},
			{"created", formatTime(a.CreatedAt)}} {
			fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
		}
		return tw.Flush()
	}
}

// artifactDownload is `pt artifact download ID`.
type artifactDownload struct{ app *app }

const artifactDownloadSynopsis = "pt artifact download ID [-o FILE|-]"

// bind binds the flags; the returned run writes the artifact's bytes to FILE
// (default: its name in the current directory; "-" is stdout) and checks
// them against the stored SHA-256. A file that fails the check is removed.
func (c *artifactDownload) bind(fs *flag.FlagSet) runFunc {
	out := fs.String("o", "", `output file ("-": stdout; default: the artifact's name)`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 {
			return in.usageErr("want one artifact ID")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		a, err := cl.Artifacts.Get(ctx, pos[0])
		if err != nil {
			return err
		}
		rc, err := cl.Artifacts.Download(ctx, a.ID)
		if err != nil {
			return err
		}
		defer rc.Close()
		dst := *out
		if dst == "" {
			dst = filepath.Base(a.Name)
		}
		var w io.Writer = c.app.stdout
		var f *os.File
		if dst != "-" {
			if f, err = os.Create(dst); err != nil {
				return err
			}
			defer f.Close()
			w = f
		}
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(w, h), rc); err != nil {
			return fmt.Errorf("download %s: %w", a.ID, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != a.SHA256 {
			if f != nil {
				os.Remove(dst)
			}
			return fmt.Errorf("download %s: content sha256 %s, want %s", a.ID, got, a.SHA256)
		}
		if f != nil {
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintln(c.app.stderr, dst)
		}
		return nil
	}
}

// artifactRm is `pt artifact rm ID...`.
type artifactRm struct{ app *app }

const artifactRmSynopsis = "pt artifact rm ID [ID...]"

// bind binds the flags; the returned run deletes each artifact and prints
// its ID.
func (c *artifactRm) bind(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) == 0 {
			return in.usageErr("want at least one artifact ID")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		for _, id := range pos {
			if err := cl.Artifacts.Delete(ctx, id); err != nil {
				return err
			}
			fmt.Fprintln(c.app.stdout, id)
		}
		return nil
	}
}
