package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/build"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// BuildLogLine is one line of a build's log (NDJSON on the wire): a step
// starting, a cache hit or a step's end, a RUN's output, a layer's pull
// progress, an info line, the failure, and the end.
type BuildLogLine struct {
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
	// Type is step, cache, output, pull, info, error or done.
	Type        string `json:"type"`
	Step        int    `json:"step,omitempty"`
	Steps       int    `json:"steps,omitempty"`
	Line        int    `json:"line,omitempty"`
	Instruction string `json:"instruction,omitempty"`
	// Cached is true for a step served from the layer cache (type cache).
	Cached *bool `json:"cached,omitempty"`
	// DurationMs is how long a step took (type cache).
	DurationMs *int64 `json:"duration_ms,omitempty"`
	// Stream and Text for output; Text also for info and error.
	Stream string `json:"stream,omitempty"`
	Text   string `json:"text,omitempty"`
	// Layer, Bytes and Total for pull progress.
	Layer string `json:"layer,omitempty"`
	Bytes *int64 `json:"bytes,omitempty"`
	Total *int64 `json:"total,omitempty"`
	// ExitCode is a failed RUN's (type error).
	ExitCode *int `json:"exit_code,omitempty"`
	// Status and VersionID end the log (type done).
	Status    string `json:"status,omitempty"`
	VersionID string `json:"version_id,omitempty"`
}

// buildLog is a running build's log: appended by the build, read (and
// followed) by API calls, saved to the build's record now and then.
type buildLog struct {
	mu      sync.Mutex
	lines   [][]byte
	size    int
	max     int
	dropped int
	done    bool
	wake    chan struct{} // closed and replaced on every append
}

func newBuildLog(max int) *buildLog { return &buildLog{max: max, wake: make(chan struct{})} }

// add appends a line, numbering it; past the size cap output lines are
// dropped (counted, and said once) so the steps and the end always show.
func (l *buildLog) add(line BuildLogLine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	if line.Type == "output" && l.size > l.max {
		if l.dropped == 0 {
			l.addLocked(BuildLogLine{Type: "info", Text: "log limit reached: further RUN output is not kept"})
		}
		l.dropped++
		return
	}
	l.addLocked(line)
}

// render is the line as add would write it next.
func (l *buildLog) render(line BuildLogLine) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renderLocked(line)
}

func (l *buildLog) renderLocked(line BuildLogLine) []byte {
	line.Seq = len(l.lines) + 1
	if line.Time.IsZero() {
		line.Time = time.Now().UTC()
	}
	b, _ := json.Marshal(line)
	return append(b, '\n')
}

func (l *buildLog) addLocked(line BuildLogLine) {
	b := l.renderLocked(line)
	l.lines = append(l.lines, b)
	l.size += len(b)
	close(l.wake)
	l.wake = make(chan struct{})
}

func (l *buildLog) finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	close(l.wake)
	l.wake = make(chan struct{})
}

// since returns the lines after seq, whether the log is finished, and a
// channel closed at the next change.
func (l *buildLog) since(seq int) ([][]byte, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq < 0 {
		seq = 0
	}
	var out [][]byte
	if seq < len(l.lines) {
		out = append(out, l.lines[seq:]...)
	}
	return out, l.done, l.wake
}

func (l *buildLog) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Join(l.lines, nil)
}

// builds tracks the builds this process runs, and the sandboxes they run
// on the host with no sandbox record (build boxes, the box a started-state
// snapshot is taken of), which the sweep must leave alone.
type builds struct {
	mu    sync.Mutex
	logs  map[string]*buildLog
	boxes map[string]bool
	sem   chan struct{}
}

func newBuilds(n int) *builds {
	return &builds{logs: map[string]*buildLog{}, boxes: map[string]bool{}, sem: make(chan struct{}, max(n, 1))}
}

// holdBox marks id as a build's own sandbox until the returned func runs.
// Call it before the host starts the box, so a sweep never sees it
// unmarked while it holds anything.
func (b *builds) holdBox(id string) (release func()) {
	b.mu.Lock()
	b.boxes[id] = true
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.boxes, id)
		b.mu.Unlock()
	}
}

// ownsBox reports whether id is a running build's own sandbox.
func (b *builds) ownsBox(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.boxes[id]
}

func (b *builds) live(id string) *buildLog {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.logs[id]
}

func (b *builds) running() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.logs)
}

// startTemplateBuild runs an accepted build in the background.
func (s *Service) startTemplateBuild(ctx context.Context, pb *pendingBuild) {
	lg := newBuildLog(s.cfg.TemplateBuilds.LogMaxBytes)
	s.builds.mu.Lock()
	s.builds.logs[pb.rec.ID] = lg
	s.builds.mu.Unlock()
	s.bg.GoFor(ctx, func(ctx context.Context) {
		defer func() {
			s.builds.mu.Lock()
			delete(s.builds.logs, pb.rec.ID)
			s.builds.mu.Unlock()
		}()
		s.runTemplateBuild(ctx, pb, lg)
	})
}

// runTemplateBuild runs one build to its end and records it. Only a build
// that succeeds writes a version, and only as its last step: a failure
// leaves nothing but the build's record.
func (s *Service) runTemplateBuild(ctx context.Context, pb *pendingBuild, lg *buildLog) {
	log := s.log.With("build", pb.rec.ID, "slug", pb.rec.Slug, "org", pb.rec.OrgID)
	stopSaving := make(chan struct{})
	saved := make(chan struct{})
	go func() { // the log reaches the record every two seconds
		defer close(saved)
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopSaving:
				return
			case <-t.C:
				rec := pb.record()
				rec.Log = lg.bytes()
				if err := s.store.UpdateTemplateBuild(ctx, rec); err != nil && ctx.Err() == nil {
					log.WarnContext(ctx, "template build: save log", "err", err)
				}
			}
		}
	}()
	select {
	case s.builds.sem <- struct{}{}:
	default:
		lg.add(BuildLogLine{Type: "info", Text: "waiting for a build slot"})
		select {
		case s.builds.sem <- struct{}{}:
		case <-ctx.Done():
		}
	}
	var v store.TemplateVersion
	var err error
	if ctx.Err() == nil {
		func() {
			defer func() { <-s.builds.sem }()
			bctx, cancel := context.WithTimeout(ctx, pb.timeout)
			defer cancel()
			v, err = s.buildVersion(bctx, pb, lg)
			if err != nil && bctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
				err = fmt.Errorf("the build ran past its timeout of %s", pb.timeout)
			}
		}()
	} else {
		err = ctx.Err()
	}
	close(stopSaving)
	<-saved
	cctx := context.WithoutCancel(ctx)
	now := time.Now().UTC()
	rec := pb.record()
	rec.FinishedAt, rec.BoxID = &now, ""
	if err == nil {
		err = s.store.PutTemplateVersion(cctx, v)
	}
	if err != nil {
		if tp, ok := s.host.(hostapi.Templater); ok {
			tp.RemoveTemplate(cctx, pb.versionN)
		}
		if err := s.deleteTemplateArchive(cctx, v.ID); err != nil {
			log.WarnContext(ctx, "template build: remove the object store's copy", "err", err)
		}
		if v.Spec.Started != nil {
			if sn, serr := s.snapshotter(); serr == nil {
				sn.RemoveSnapshot(cctx, v.Spec.Started.SnapshotID)
			}
		}
		rec.Status, rec.Error = store.BuildFailed, err.Error()
		var se *build.StepError
		if errors.As(err, &se) {
			rec.Failure = &store.BuildFailure{Step: se.Step, Steps: se.Steps, Line: se.Line, Instruction: se.Instruction, ExitCode: se.ExitCode}
		} else {
			lg.add(BuildLogLine{Type: "error", Text: err.Error()})
		}
		log.WarnContext(ctx, "template build failed", "err", err)
	} else {
		rec.Status = store.BuildReady
		log.InfoContext(ctx, "template build done", "version", v.ID, "size_bytes", v.SizeBytes)
	}
	done := BuildLogLine{Type: "done", Status: string(rec.Status), Time: time.Now().UTC()}
	if err == nil {
		done.VersionID = v.ID
	}
	// The record is final before a follower sees the log's last line, so
	// a GET right after it answers the outcome.
	rec.Log = append(lg.bytes(), lg.render(done)...)
	if err := s.store.UpdateTemplateBuild(cctx, rec); err != nil {
		log.ErrorContext(ctx, "template build: record result", "err", err)
	}
	lg.add(done)
	lg.finish()
	if tp, ok := s.host.(hostapi.Templater); ok && pb.base.image != "" && pb.kind == BuildDockerfile {
		tp.RemoveTemplate(cctx, baseDirID(pb))
	}
	s.sweepUploads(cctx)
	s.trimBuildCache(cctx, pb.rec.OrgID)
}

// buildVersion makes the version's rootfs (and started-state snapshot)
// and returns its record, not yet stored.
func (s *Service) buildVersion(ctx context.Context, pb *pendingBuild, lg *buildLog) (store.TemplateVersion, error) {
	tp := s.host.(hostapi.Templater)
	progress := func(e hostapi.ImageEvent) {
		if e.Layer == "" {
			lg.add(BuildLogLine{Type: "info", Text: e.Message})
			return
		}
		b, t := e.Bytes, e.Total
		line := BuildLogLine{Type: "pull", Layer: e.Layer, Bytes: &b, Total: &t, Text: e.Message}
		if e.Cached {
			c := true
			line.Cached = &c
		}
		lg.add(line)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	v := store.TemplateVersion{ID: pb.versionN, Slug: pb.rec.Slug, Status: store.TemplateReady, OrgID: pb.rec.OrgID,
		BuildID: pb.rec.ID, CreatedAt: now, UpdatedAt: now}
	var base string
	var layers []string
	var info *hostapi.ImageInfo
	switch pb.kind {
	case BuildFromImage:
		lg.add(BuildLogLine{Type: "info", Text: fmt.Sprintf("pulling %s (%s)", pb.req.FromImage, pb.base.digest)})
		img, err := tp.PullImage(ctx, pb.req.FromImage, pb.auth, progress)
		if err != nil {
			return v, err
		}
		layers, info = img.Layers, &img
		v.Spec.Source = store.TemplateSource{Kind: BuildFromImage, Image: pb.req.FromImage, ImageDigest: img.Digest}
	case BuildFromUpload:
		lg.add(BuildLogLine{Type: "info", Text: "importing the uploaded image tarball"})
		img, err := s.importUpload(ctx, tp, pb, progress)
		if err != nil {
			return v, err
		}
		layers, info = img.Layers, &img
		v.Spec.Source = store.TemplateSource{Kind: BuildFromUpload, ImageDigest: img.Digest}
	case BuildDockerfile:
		var err error
		base, layers, err = s.runDockerfile(ctx, pb, lg, progress)
		if err != nil {
			return v, err
		}
		v.Spec.Source = store.TemplateSource{Kind: BuildDockerfile, DockerfileSHA256: pb.file.SHA256,
			Image: pb.base.image, ImageDigest: pb.base.digest, FromTemplate: pb.base.slug}
		if pb.base.version != nil {
			v.Spec.BaseVersionID = pb.base.version.ID
		}
	}
	v.Spec.Layers = layers
	v.Spec.Settings = s.settingsFor(pb, info)
	lg.add(BuildLogLine{Type: "info", Text: "writing the template's root filesystem"})
	rootfs, size, err := tp.MakeTemplate(ctx, v.ID, base, layers)
	if err != nil {
		return v, err
	}
	v.RootFS, v.SizeBytes = rootfs, size
	if s.cfg.Objects != nil {
		// Hosts that lack the rootfs fetch it from there (template_copies.go).
		lg.add(BuildLogLine{Type: "info", Text: "copying the root filesystem to the object store"})
		if err := s.uploadTemplate(ctx, v); err != nil {
			return v, fmt.Errorf("copy the root filesystem to the object store: %w", err)
		}
	}
	if pb.req.Snapshot {
		lg.add(BuildLogLine{Type: "info", Text: "starting a sandbox to snapshot its started state"})
		st, err := s.startedState(ctx, v, pb.network)
		if err != nil {
			return v, fmt.Errorf("started-state snapshot: %w", err)
		}
		v.Spec.Started = st
		lg.add(BuildLogLine{Type: "info", Text: fmt.Sprintf("memory snapshot %s taken", st.SnapshotID)})
	}
	return v, nil
}

// runDockerfile runs the plan's steps and returns the base rootfs and the
// layers of the version: the base's (an image's, or none for a template
// whose rootfs is the base), then the build's own diff.
func (s *Service) runDockerfile(ctx context.Context, pb *pendingBuild, lg *buildLog, progress func(hostapi.ImageEvent)) (string, []string, error) {
	tp := s.host.(hostapi.Templater)
	var baseRootFS, baseKey string
	var layers []string
	switch {
	case pb.base.image != "":
		lg.add(BuildLogLine{Type: "info", Text: fmt.Sprintf("pulling %s (%s)", pb.base.image, pb.base.digest)})
		img, err := tp.PullImage(ctx, pb.base.image, pb.base.auth, progress)
		if err != nil {
			return "", nil, err
		}
		layers, baseKey = img.Layers, "image:"+img.Digest
		// Build sandboxes need one directory as their lower layer: the
		// image flattened, kept as a hidden version directory.
		root, _, err := tp.MakeTemplate(ctx, baseDirID(pb), "", img.Layers)
		if err != nil {
			return "", nil, err
		}
		baseRootFS = root
	default:
		v := pb.base.version
		if v == nil {
			lg.add(BuildLogLine{Type: "info", Text: fmt.Sprintf("building the %s template first", pb.base.slug)})
			rv, err := s.tpl.ready(ctx, pb.base.slug)
			if err != nil {
				return "", nil, err
			}
			v = &rv
			pb.base.version = v
		}
		root, err := s.templateRootFS(ctx, *v)
		if err != nil {
			return "", nil, err
		}
		baseRootFS, baseKey = root, "template:"+v.ID
	}
	var bctx *build.Context
	if id := pb.req.ContextUploadID; id != "" {
		f, err := s.spoolUpload(ctx, pb.rec.OrgID, uploadContext, id)
		if err != nil {
			return "", nil, err
		}
		defer os.Remove(f)
		if bctx, err = build.OpenContext(f); err != nil {
			return "", nil, err
		}
		defer bctx.Close()
	}
	for _, a := range pb.plan.UnusedArgs {
		lg.add(BuildLogLine{Type: "info", Text: fmt.Sprintf("build argument %s was not declared by an ARG", a)})
	}
	runner := &boxRunner{s: s, pb: pb, rootfs: baseRootFS}
	b := &build.Builder{
		Runner: runner, Cache: &buildCache{s: s, org: pb.rec.OrgID}, Context: bctx, BaseKey: baseKey, NoCache: pb.req.NoCache,
		Log: func(e build.Event) { lg.add(buildEventLine(e)) },
	}
	res, err := b.Run(ctx, pb.plan)
	if err != nil {
		return "", nil, err
	}
	lg.add(BuildLogLine{Type: "info", Text: fmt.Sprintf("%d steps from the cache, %d run", res.Hits, res.Misses)})
	if res.SnapshotID == "" {
		return baseRootFS, nil, nil
	}
	diff, err := tp.CaptureDiff(ctx, res.SnapshotID)
	if err != nil {
		return "", nil, err
	}
	if pb.base.image != "" {
		return "", append(layers, diff), nil
	}
	return baseRootFS, []string{diff}, nil
}

// record returns the build's record as it stands.
func (pb *pendingBuild) record() store.TemplateBuild {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	return pb.rec
}

// setBox records the build sandbox now running and returns the record.
func (pb *pendingBuild) setBox(id string) store.TemplateBuild {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	pb.rec.BoxID = id
	return pb.rec
}

// baseDirID names the hidden directory an image base is flattened into
// for build sandboxes: a template version ID derived from the build, so
// the host's version directory rules apply and a crash's leftover is
// swept with the build's.
func baseDirID(pb *pendingBuild) string {
	return sandbox.PrefixTemplateVersion + strings.TrimPrefix(pb.rec.ID, sandbox.PrefixTemplateBuild)
}

func buildEventLine(e build.Event) BuildLogLine {
	l := BuildLogLine{Type: e.Type, Step: e.Step, Steps: e.Steps, Line: e.Line, Instruction: e.Instruction, Stream: e.Stream, Text: e.Text}
	if e.Type == "cache" {
		c, ms := e.Cached, e.Took.Milliseconds()
		l.Cached, l.DurationMs = &c, &ms
	}
	return l
}

// boxRunner starts build sandboxes on a host: not sandboxes of any org
// (no record, no quota, no events), sized by TemplateBuildConfig, on the
// default runtime class, with the build's network policy.
type boxRunner struct {
	s      *Service
	pb     *pendingBuild
	rootfs string
}

// Start implements build.Runner.
func (r *boxRunner) Start(ctx context.Context, snapshotID string) (build.Box, error) {
	s := r.s
	cfg := s.cfg.TemplateBuilds
	id := sandbox.NewID(sandbox.PrefixSandbox)
	spec := StartSpec{ID: id, RootFS: r.rootfs, CPU: cfg.CPU, RAMMB: cfg.RAMMB, DiskGB: cfg.DiskGB,
		AgentToken: randomToken(), Runtime: s.cfg.DefaultRuntime}
	if r.pb.network != nil {
		spec.Network = &NetworkSpec{Policy: *r.pb.network}
	}
	if snapshotID != "" {
		spec.Clone = &CloneSpec{SnapshotID: snapshotID}
	}
	// The record names the box first, so a crash can still remove it.
	if err := s.store.UpdateTemplateBuild(ctx, r.pb.setBox(id)); err != nil {
		return nil, err
	}
	release := s.builds.holdBox(id)
	inst, err := s.host.Start(ctx, spec)
	if err != nil {
		s.host.Destroy(context.WithoutCancel(ctx), id)
		release()
		return nil, err
	}
	base := "http://" + net.JoinHostPort(inst.Address, strconv.Itoa(AgentPort))
	return &hostBox{s: s, id: id, class: spec.Runtime, ag: agentclient.New(base, spec.AgentToken, nil), release: release}, nil
}

// hostBox is a running build sandbox.
type hostBox struct {
	s       *Service
	id      string
	class   string
	ag      *agentclient.Client
	release func()
}

// Exec implements build.Box: the step's user and working directory are
// set as the agent's defaults first (one step runs at a time).
func (b *hostBox) Exec(ctx context.Context, argv, env []string, user, workdir string, stdout, stderr func([]byte)) (int, error) {
	if err := b.ag.InitWith(ctx, agentclient.InitRequest{Env: map[string]string{}, User: orRoot(user), Workdir: workdir}); err != nil {
		return 0, fmt.Errorf("USER %s: %w", user, err)
	}
	res, err := b.ag.Exec(ctx, agentclient.ExecRequest{Cmd: argv[0], Args: argv[1:], Env: envMap(env), Cwd: workdir}, stdout, stderr)
	if err != nil {
		return 0, err
	}
	if res.Signaled {
		return 128 + 9, nil
	}
	return res.Code, nil
}

func orRoot(user string) string {
	if user == "" {
		return "root"
	}
	return user
}

// Extract implements build.Box.
func (b *hostBox) Extract(ctx context.Context, dir, owner string, r io.Reader) error {
	_, err := b.ag.ExtractTar(ctx, dir, owner, r)
	return err
}

// IsDir implements build.Box.
func (b *hostBox) IsDir(ctx context.Context, path string) bool {
	e, err := b.ag.Stat(ctx, path)
	if err == nil && e.Type == "symlink" {
		if t, terr := b.ag.Stat(ctx, e.SymlinkTarget); terr == nil {
			return t.IsDir()
		}
	}
	return err == nil && e.IsDir()
}

// Snapshot implements build.Box: a disk-only snapshot (reflink) of the
// box, named like any snapshot.
func (b *hostBox) Snapshot(ctx context.Context) (string, error) {
	sn, err := b.s.snapshotter()
	if err != nil {
		return "", err
	}
	id := sandbox.NewID(sandbox.PrefixSnapshot)
	if _, err := sn.Snapshot(ctx, b.id, id, b.class, false); err != nil {
		return "", err
	}
	return id, nil
}

// Close implements build.Box.
func (b *hostBox) Close(ctx context.Context) error {
	defer b.release()
	return b.s.host.Destroy(ctx, b.id)
}

// buildCache is an org's layer cache in the store; entries whose
// snapshot is gone are dropped on use.
type buildCache struct {
	s   *Service
	org string
}

// Get implements build.Cache.
func (c *buildCache) Get(ctx context.Context, key string) (string, bool) {
	e, err := c.s.store.GetBuildCache(ctx, c.org, key)
	if err != nil || !e.Ready {
		return "", false
	}
	e.UsedAt = time.Now().UTC()
	c.s.store.PutBuildCache(ctx, e)
	return e.SnapshotID, true
}

// Put implements build.Cache.
func (c *buildCache) Put(ctx context.Context, key, snapID string) error {
	now := time.Now().UTC()
	if old, err := c.s.store.GetBuildCache(ctx, c.org, key); err == nil && old.SnapshotID != snapID {
		if sn, err := c.s.snapshotter(); err == nil {
			sn.RemoveSnapshot(context.WithoutCancel(ctx), old.SnapshotID)
		}
	}
	return c.s.store.PutBuildCache(ctx, store.BuildCacheEntry{OrgID: c.org, Key: key, SnapshotID: snapID, Ready: true, CreatedAt: now, UsedAt: now})
}

// trimBuildCache drops an org's least recently used cache entries beyond
// the cap (not while one of its builds runs).
func (s *Service) trimBuildCache(ctx context.Context, org string) {
	if running, _ := s.store.ListTemplateBuilds(ctx, store.BuildFilter{OrgID: org, Status: store.BuildRunning}); len(running) > 0 {
		return
	}
	es, err := s.store.ListBuildCache(ctx, org)
	if err != nil || len(es) <= s.cfg.TemplateBuilds.CacheMaxEntries {
		return
	}
	sn, err := s.snapshotter()
	if err != nil {
		return
	}
	for _, e := range es[:len(es)-s.cfg.TemplateBuilds.CacheMaxEntries] {
		if err := s.store.DeleteBuildCache(ctx, org, e.Key); err == nil {
			sn.RemoveSnapshot(ctx, e.SnapshotID)
		}
	}
}

// TemplateBuildLog writes the build's log lines after seq to fn; with
// follow it keeps writing until the build ends (or ctx does).
func (s *Service) TemplateBuildLog(ctx context.Context, p Principal, slug, id string, seq int, follow bool, fn func(line []byte) error) error {
	b, err := s.GetTemplateBuild(ctx, p, slug, id)
	if err != nil {
		return err
	}
	if lg := s.builds.live(id); lg != nil {
		for {
			lines, done, wake := lg.since(seq)
			for _, l := range lines {
				if err := fn(l); err != nil {
					return err
				}
				seq++
			}
			if done || !follow {
				return nil
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return nil
			}
		}
	}
	// Another process runs it, or it ended: read the record, polling
	// while it runs.
	for {
		full, err := s.store.GetTemplateBuild(ctx, p.OrgID, b.ID)
		if err != nil {
			return err
		}
		lines := bytes.SplitAfter(full.Log, []byte("\n"))
		for _, l := range lines {
			if len(l) == 0 {
				continue
			}
			var hdr struct {
				Seq int `json:"seq"`
			}
			if json.Unmarshal(l, &hdr) == nil && hdr.Seq <= seq {
				continue
			}
			if err := fn(l); err != nil {
				return err
			}
			seq = hdr.Seq
		}
		if full.Status != store.BuildRunning || !follow {
			return nil
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return nil
		}
		if lg := s.builds.live(id); lg != nil {
			return s.TemplateBuildLog(ctx, p, slug, id, seq, follow, fn)
		}
	}
}

// failInterruptedTemplateBuilds marks builds a crash left running as
// failed and removes what they left: the build sandbox, the half-made
// version directory, unfinished cache entries. A build another host
// runs is left alone while that host is not lost: ptds share the store
// (docs/ARCHITECTURE.md, "Many hosts"), and any of them may start while
// another builds.
func (s *Service) failInterruptedTemplateBuilds(ctx context.Context) error {
	bs, err := s.store.ListTemplateBuilds(ctx, store.BuildFilter{Status: store.BuildRunning})
	if err != nil {
		return err
	}
	tp, _ := s.host.(hostapi.Templater)
	var errs []error
	for _, b := range bs {
		if s.builds.live(b.ID) != nil {
			continue
		}
		full, err := s.store.GetTemplateBuild(ctx, "", b.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if s.buildRunsElsewhere(ctx, full) {
			continue
		}
		if full.BoxID != "" {
			s.host.Destroy(ctx, full.BoxID)
		}
		if tp != nil {
			if _, err := s.store.GetTemplateVersion(ctx, full.VersionID); store.IsNotFound(err) {
				tp.RemoveTemplate(ctx, full.VersionID)
			}
			tp.RemoveTemplate(ctx, baseDirID(&pendingBuild{rec: full}))
		}
		now := time.Now().UTC()
		full.Status, full.Error, full.BoxID, full.FinishedAt = store.BuildFailed, "interrupted by a ptd restart", "", &now
		errs = append(errs, s.store.UpdateTemplateBuild(ctx, full))
	}
	es, err := s.store.ListBuildCache(ctx, "")
	if err == nil {
		for _, e := range es {
			if !e.Ready {
				s.store.DeleteBuildCache(ctx, e.OrgID, e.Key)
			}
		}
	}
	s.pruneLayers(ctx)
	return errors.Join(errs...)
}

// buildRunsElsewhere reports whether build b is another host's that is
// not lost, whose ptd is running it still (or will fail it itself when
// it starts again).
func (s *Service) buildRunsElsewhere(ctx context.Context, b store.TemplateBuild) bool {
	var rec buildRequestRecord
	json.Unmarshal([]byte(b.Request), &rec)
	return s.builtElsewhere(ctx, rec.Host)
}

// builtElsewhere reports whether host, the one a running build (custom or
// platform) recorded, is another host that is not lost: its ptd runs the
// build still, or fails it itself when it starts again. None recorded
// (records made before it was kept) and a host that cannot be read count
// as gone.
func (s *Service) builtElsewhere(ctx context.Context, host string) bool {
	if host == "" || host == s.host.ID() {
		return false
	}
	h, err := s.store.GetHost(ctx, host)
	return err == nil && h.State != store.HostLost
}
