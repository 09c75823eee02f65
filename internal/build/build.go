// Package build runs a Dockerfile plan (internal/dockerfile) step by step
// inside build sandboxes, never on the host: a Dockerfile is untrusted
// code. Every RUN is a process in a sandbox started through a Runner;
// COPY and ADD send tar streams of build-context files into it; WORKDIR
// makes its directory there. After each step that changes files the
// sandbox's disk is snapshotted (a reflink, milliseconds) and the snapshot
// cached under a key chaining the parent's key, the step as expanded and
// the content hashes of the files it copies, so a rebuild that changes one
// COPY reuses every step before it and starts its sandbox from that
// step's snapshot. docs/templates.md describes the user's side.
package build

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/dockerfile"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Box is a running build sandbox.
type Box interface {
	// Exec runs argv as user (empty: root) in workdir with exactly env,
	// streaming output, and returns its exit code.
	Exec(ctx context.Context, argv, env []string, user, workdir string, stdout, stderr func([]byte)) (int, error)
	// Extract unpacks the tar r below dir; owner, when set, owns every
	// entry.
	Extract(ctx context.Context, dir, owner string, r io.Reader) error
	// IsDir reports whether path is a directory in the box.
	IsDir(ctx context.Context, path string) bool
	// Snapshot copies the box's disk and returns the snapshot's ID.
	Snapshot(ctx context.Context) (string, error)
	// Close destroys the box.
	Close(ctx context.Context) error
}

// Runner starts build sandboxes on the build's base, from a step's
// snapshot when one is given (empty: the bare base).
type Runner interface {
	Start(ctx context.Context, snapshotID string) (Box, error)
}

// Cache is the layer cache: step keys to disk snapshots.
type Cache interface {
	// Get returns the snapshot cached under key, if any.
	Get(ctx context.Context, key string) (snapshotID string, ok bool)
	// Put records that snapshot holds the disk after the step keyed key.
	Put(ctx context.Context, key, snapshotID string) error
}

// Event is one line of a build's log.
type Event struct {
	// Type is step, cache, output, info or error.
	Type        string
	Step, Steps int
	Line        int
	Instruction string
	// Stream (stdout, stderr) and Text for output.
	Stream, Text string
	Cached       bool
	// Took is how long a step took (step ends).
	Took time.Duration
}

// Builder runs one plan.
type Builder struct {
	Runner  Runner
	Cache   Cache
	Context *Context
	// BaseKey identifies the base (an image digest or template version):
	// the first link of every cache key.
	BaseKey string
	// NoCache runs every step, caching the results anew.
	NoCache bool
	// Log receives events; it must not block for long.
	Log func(Event)
}

// StepError is a step that failed: its position, its Dockerfile line and,
// for a RUN, its exit code.
type StepError struct {
	Step, Steps int
	Line        int
	Instruction string
	// ExitCode is set for a RUN that exited non-zero.
	ExitCode *int
	Err      error
}

func (e *StepError) Error() string {
	where := fmt.Sprintf("step %d/%d (Dockerfile line %d: %s)", e.Step, e.Steps, e.Line, e.Instruction)
	if e.ExitCode != nil {
		return fmt.Sprintf("%s: exited with code %d", where, *e.ExitCode)
	}
	return fmt.Sprintf("%s: %v", where, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// errExit is a RUN's non-zero exit.
var errExit = errors.New("non-zero exit")

// Result is what a build left.
type Result struct {
	// SnapshotID holds the disk after the last step that changed files;
	// empty when none did.
	SnapshotID string
	// Hits and Misses count file steps served from the cache and run.
	Hits, Misses int
}

func chain(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (b *Builder) log(e Event) {
	if b.Log != nil {
		b.Log(e)
	}
}

// Run executes plan's steps and returns the final disk snapshot.
func (b *Builder) Run(ctx context.Context, plan dockerfile.Plan) (Result, error) {
	bctx := b.Context
	if bctx == nil {
		bctx = EmptyContext()
	}
	var res Result
	key := chain("base", b.BaseKey)
	var box Box
	defer func() {
		if box != nil {
			box.Close(context.WithoutCancel(ctx))
		}
	}()
	n := len(plan.Steps)
	for i, st := range plan.Steps {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		fail := func(err error, exit *int) error {
			se := &StepError{Step: i + 1, Steps: n, Line: st.Line, Instruction: st.Text, ExitCode: exit, Err: err}
			b.log(Event{Type: "error", Step: i + 1, Steps: n, Line: st.Line, Instruction: st.Text, Text: se.Error()})
			return se
		}
		t0 := time.Now()
		b.log(Event{Type: "step", Step: i + 1, Steps: n, Line: st.Line, Instruction: st.Text})
		if !st.ChangesFiles() {
			key = chain(key, st.Key())
			continue
		}
		var items []copyItem
		content := ""
		if st.Kind == dockerfile.Copy || st.Kind == dockerfile.Add {
			// The content hash does not depend on where files land (the
			// step's key has the destination), so a cache lookup needs
			// no sandbox.
			var err error
			if items, err = bctx.plan(st.Sources, st.Dest, nil); err != nil {
				return res, fail(err, nil)
			}
			content = bctx.hash(items)
		}
		key = chain(key, st.Key(), content)
		if !b.NoCache && b.Cache != nil {
			if snap, ok := b.Cache.Get(ctx, key); ok {
				res.SnapshotID = snap
				res.Hits++
				if box != nil {
					box.Close(context.WithoutCancel(ctx))
					box = nil
				}
				b.log(Event{Type: "cache", Step: i + 1, Steps: n, Line: st.Line, Instruction: st.Text, Cached: true, Took: time.Since(t0)})
				continue
			}
		}
		res.Misses++
		if box == nil {
			var err error
			if box, err = b.Runner.Start(ctx, res.SnapshotID); err != nil {
				return res, fail(fmt.Errorf("build sandbox: %w", err), nil)
			}
		}
		if (st.Kind == dockerfile.Copy || st.Kind == dockerfile.Add) && !strings.HasSuffix(st.Dest, "/") {
			// "COPY file /dir" copies into an existing directory: ask the
			// image.
			var err error
			if items, err = bctx.plan(st.Sources, st.Dest, func(p string) bool { return box.IsDir(ctx, p) }); err != nil {
				return res, fail(err, nil)
			}
		}
		if err := b.runStep(ctx, box, st, items, bctx, i+1, n); err != nil {
			var exit *exitError
			if errors.As(err, &exit) {
				code := exit.code
				return res, fail(errExit, &code)
			}
			return res, fail(err, nil)
		}
		snap, err := box.Snapshot(ctx)
		if err != nil {
			return res, fail(fmt.Errorf("snapshot: %w", err), nil)
		}
		res.SnapshotID = snap
		if b.Cache != nil {
			if err := b.Cache.Put(ctx, key, snap); err != nil {
				return res, fail(fmt.Errorf("cache: %w", err), nil)
			}
		}
		b.log(Event{Type: "cache", Step: i + 1, Steps: n, Line: st.Line, Instruction: st.Text, Cached: false, Took: time.Since(t0)})
	}
	return res, nil
}

type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit code %d", e.code) }

// runStep runs one file-changing step in box.
func (b *Builder) runStep(ctx context.Context, box Box, st dockerfile.Step, items []copyItem, bctx *Context, step, steps int) error {
	switch st.Kind {
	case dockerfile.Run:
		out := func(stream string) func([]byte) {
			return func(p []byte) {
				b.log(Event{Type: "output", Step: step, Steps: steps, Line: st.Line, Stream: stream, Text: string(p)})
			}
		}
		code, err := box.Exec(ctx, st.Argv, st.State.RunEnv(), st.State.User, st.State.Workdir, out("stdout"), out("stderr"))
		if err != nil {
			return err
		}
		if code != 0 {
			return &exitError{code: code}
		}
		return nil
	case dockerfile.Workdir:
		// Made owned by the current USER, as BuildKit does.
		return extractTar(ctx, box, "/", st.State.User, func(w io.Writer) error {
			return writeDirs(w, st.State.Workdir)
		})
	case dockerfile.Copy, dockerfile.Add:
		var chmod *uint32
		if st.Chmod != "" {
			m, err := dockerfile.ParseMode(st.Chmod)
			if err != nil {
				return err
			}
			chmod = &m
		}
		return extractTar(ctx, box, "/", st.Chown, func(w io.Writer) error {
			return bctx.writeCopy(w, items, chmod, st.Kind == dockerfile.Add)
		})
	}
	return fmt.Errorf("%s: not a file step: %w", st.Kind, sandbox.ErrInvalidArgument)
}

// extractTar streams what write produces into the box.
func extractTar(ctx context.Context, box Box, dir, owner string, write func(io.Writer) error) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(write(pw)) }()
	err := box.Extract(ctx, dir, owner, pr)
	pr.CloseWithError(errors.New("extract ended"))
	return err
}

// writeDirs writes a tar of dir and its parents (directories only; the
// box leaves existing ones as they are).
func writeDirs(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	rel := strings.TrimPrefix(path.Clean(dir), "/")
	if rel != "" {
		parts := strings.Split(rel, "/")
		for i := range parts {
			hdr := &tar.Header{Name: strings.Join(parts[:i+1], "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755,
				ModTime: time.Now(), Format: tar.FormatPAX}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}
