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
	asJSON := jsonFlag(fs, "print the artifact as JSON")
	return callRun(c.app, exactArgs(2, "want a sandbox ID and a path"), func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Artifact, error) {
		return cl.Artifacts.Create(ctx, pos[0], platinum.ArtifactCreate{Path: pos[1], Name: *name})
	}, jsonOrLine(c.app, asJSON, func(a *platinum.Artifact) string { return a.ID }))
}

const artifactListSynopsis = "pt artifact list [--sandbox ID] [--json]"

// artifactList is `pt artifact list`: the org's artifacts, newest first.
func artifactList(a *app) verb {
	var sbx *string
	return &listVerb[platinum.Artifact]{app: a, check: noArgs, header: "ID\tSANDBOX\tKIND\tSIZE\tNAME\tCREATED",
		flags: func(fs *flag.FlagSet) { sbx = fs.String("sandbox", "", "only this sandbox's artifacts") },
		list: func(ctx context.Context, cl *platinum.Client, _ []string) ([]platinum.Artifact, error) {
			return cl.Artifacts.List(ctx, *sbx)
		},
		cells: func(r *platinum.Artifact) []string {
			return []string{r.ID, r.SandboxID, r.Kind, formatBytes(r.SizeBytes), r.Name, formatTime(r.CreatedAt)}
		}}
}

// artifactGet is `pt artifact get ID`.
type artifactGet struct{ app *app }

const artifactGetSynopsis = "pt artifact get ID [--json]"

// bind binds the flags; the returned run prints one artifact.
func (c *artifactGet) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, "print the artifact as JSON")
	return callRun(c.app, exactArgs(1, "want one artifact ID"), getArtifact, jsonOr(c.app, asJSON, func(a *platinum.Artifact) error {
		return printFields(c.app.stdout, [2]string{"id", a.ID}, [2]string{"sandbox", a.SandboxID}, [2]string{"name", a.Name},
			[2]string{"path", a.Path}, [2]string{"kind", a.Kind}, [2]string{"content type", a.ContentType},
			[2]string{"size", formatBytes(a.SizeBytes)}, [2]string{"sha256", a.SHA256}, [2]string{"created", formatTime(a.CreatedAt)})
	}))
}

// getArtifact looks up the artifact named by the one positional argument.
func getArtifact(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Artifact, error) {
	return cl.Artifacts.Get(ctx, pos[0])
}

// artifactDownload is `pt artifact download ID`.
type artifactDownload struct{ app *app }

const artifactDownloadSynopsis = "pt artifact download ID [-o FILE|-]"

// bind binds the flags; the returned run writes the artifact's bytes to FILE
// (default: its name in the current directory; "-" is stdout) and checks
// them against the stored SHA-256. A file that fails the check is removed.
func (c *artifactDownload) bind(fs *flag.FlagSet) runFunc {
	out := fs.String("o", "", `output file ("-": stdout; default: the artifact's name)`)
	type download struct {
		a  *platinum.Artifact
		rc io.ReadCloser
	}
	return callRun(c.app, exactArgs(1, "want one artifact ID"), func(ctx context.Context, cl *platinum.Client, pos []string) (download, error) {
		a, err := getArtifact(ctx, cl, pos)
		if err != nil {
			return download{}, err
		}
		rc, err := cl.Artifacts.Download(ctx, a.ID)
		return download{a, rc}, err
	}, func(d download) error {
		a, rc := d.a, d.rc
		defer rc.Close()
		dst := *out
		if dst == "" {
			dst = filepath.Base(a.Name)
		}
		var w io.Writer = c.app.stdout
		var f *os.File
		if dst != "-" {
			var err error
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
	})
}

// artifactRm is `pt artifact rm ID...`.
type artifactRm struct{ app *app }

const artifactRmSynopsis = "pt artifact rm ID [ID...]"

// bind binds the flags; the returned run deletes each artifact and prints
// its ID.
func (c *artifactRm) bind(fs *flag.FlagSet) runFunc {
	return deleteRun(c.app, "want at least one artifact ID", func(ctx context.Context, cl *platinum.Client, id string) error {
		return cl.Artifacts.Delete(ctx, id)
	})
}
