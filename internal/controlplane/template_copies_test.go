package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/archive"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/image"
	objfs "github.com/platinum-dev/platinum/internal/objstore/fs"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// copyHost is a test host with a data dir of its own that keeps template
// copies as internal/host does (<dir>/templates/<version>/rootfs), with the
// image package's real tar writer and unpacker.
type copyHost struct {
	*fakeHost
	dir     string
	imports atomic.Int32
	// importGate, when set, holds ImportTemplate until it is closed.
	importGate chan struct{}
}

var _ hostapi.TemplateCopies = (*copyHost)(nil)

func newCopyHost(t *testing.T) *copyHost {
	h := &copyHost{fakeHost: &fakeHost{}, dir: t.TempDir()}
	h.BuildFunc = func(ctx context.Context, slug, versionID string, progress func(string)) (string, int64, error) {
		root, _, _ := h.TemplatePath(versionID)
		writeTree(t, root, map[string]string{"etc/slug": slug})
		return root, 1, nil
	}
	return h
}

func (h *copyHost) TemplatePath(versionID string) (string, bool, error) {
	if !sandbox.ValidID(sandbox.PrefixTemplateVersion, versionID) {
		return "", false, sandbox.ErrInvalidArgument
	}
	root := filepath.Join(h.dir, "templates", versionID, "rootfs")
	fi, err := os.Stat(root)
	return root, err == nil && fi.IsDir(), nil
}

func (h *copyHost) ExportTemplate(ctx context.Context, rootfs string, w io.Writer) error {
	return image.WriteTree(ctx, rootfs, w)
}

func (h *copyHost) ImportTemplate(ctx context.Context, versionID string, r io.Reader) (string, int64, error) {
	h.imports.Add(1)
	if h.importGate != nil {
		<-h.importGate
	}
	root, _, err := h.TemplatePath(versionID)
	if err != nil {
		return "", 0, err
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return "", 0, err
	}
	return root, 1, image.UnpackTree(ctx, r, root)
}

func (h *copyHost) TemplateDirs() ([]hostapi.TemplateDir, error) {
	entries, err := os.ReadDir(filepath.Join(h.dir, "templates"))
	if err != nil {
		return nil, err
	}
	var out []hostapi.TemplateDir
	for _, e := range entries {
		fi, _ := e.Info()
		out = append(out, hostapi.TemplateDir{VersionID: e.Name(), ModTime: fi.ModTime()})
	}
	return out, nil
}

// RemoveTemplate is the one hostapi.Templater method the sweep calls; the
// others are not used here.
func (h *copyHost) RemoveTemplate(ctx context.Context, versionID string) error {
	return os.RemoveAll(filepath.Join(h.dir, "templates", versionID))
}

func (h *copyHost) ResolveImage(context.Context, string, hostapi.RegistryAuth) (hostapi.ImageInfo, error) {
	return hostapi.ImageInfo{}, errors.ErrUnsupported
}

func (h *copyHost) PullImage(context.Context, string, hostapi.RegistryAuth, func(hostapi.ImageEvent)) (hostapi.ImageInfo, error) {
	return hostapi.ImageInfo{}, errors.ErrUnsupported
}

func (h *copyHost) ImportImage(context.Context, io.Reader, func(hostapi.ImageEvent)) (hostapi.ImageInfo, error) {
	return hostapi.ImageInfo{}, errors.ErrUnsupported
}

func (h *copyHost) MakeTemplate(context.Context, string, string, []string) (string, int64, error) {
	return "", 0, errors.ErrUnsupported
}

func (h *copyHost) CaptureDiff(context.Context, string) (string, error) {
	return "", errors.ErrUnsupported
}

func (h *copyHost) PruneLayers(context.Context, map[string]bool) error { return nil }

var _ hostapi.Templater = (*copyHost)(nil)

func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// twoHosts returns a building host's service and another host's, each
// with its own data dir and store, sharing one object store.
func twoHosts(t *testing.T) (builder, other *Service, bh, oh *copyHost) {
	objs, err := objfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bh, oh = newCopyHost(t), newCopyHost(t)
	builder, _ = newServiceWith(t, bh, "", nil)
	other, _ = newServiceWith(t, oh, "", nil)
	builder.cfg.Objects, other.cfg.Objects = objs, objs
	return builder, other, bh, oh
}

// customVersion makes a ready custom version on h as a build does (its
// rootfs under h's data dir holding etc/app), written to the object
// store when upload is set.
func customVersion(t *testing.T, s *Service, h *copyHost, upload bool) store.TemplateVersion {
	t.Helper()
	v := store.TemplateVersion{ID: sandbox.NewID(sandbox.PrefixTemplateVersion), Slug: "app", Status: store.TemplateReady, OrgID: org.OrgID,
		CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	v.RootFS, _, _ = h.TemplatePath(v.ID)
	writeTree(t, v.RootFS, map[string]string{"etc/app": "built on the builder", "usr/bin/tool": "#!/bin/sh\n"})
	if err := os.Link(filepath.Join(v.RootFS, "etc/app"), filepath.Join(v.RootFS, "etc/app.link")); err != nil {
		t.Fatal(err)
	}
	if upload {
		if err := s.uploadTemplate(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// TestTemplateRootFSRule: the path a host boots a version from — its own
// copy, else the recorded path when readable here, else a copy made here
// (from the object store for a custom version, from the recipe for a
// platform one) — and the errors when no copy can be made.
func TestTemplateRootFSRule(t *testing.T) {
	ctx := context.Background()
	builder, other, bh, oh := twoHosts(t)
	v := customVersion(t, builder, bh, true)

	// The building host boots its own copy.
	if got, err := builder.templateRootFS(ctx, v); err != nil || got != v.RootFS {
		t.Fatalf("builder: %q %v, want %q", got, err, v.RootFS)
	}
	// Another host on this machine reads the recorded path as is.
	if got, err := other.templateRootFS(ctx, v); err != nil || got != v.RootFS {
		t.Fatalf("same machine: %q %v, want the recorded %q", got, err, v.RootFS)
	}
	if oh.imports.Load() != 0 {
		t.Fatal("a readable recorded path was copied")
	}

	// The building machine is gone: the other host unpacks its own copy.
	gone := v
	gone.RootFS = filepath.Join(t.TempDir(), "gone", "rootfs")
	own, _, _ := oh.TemplatePath(v.ID)
	got, err := other.templateRootFS(ctx, gone)
	if err != nil || got != own {
		t.Fatalf("other machine: %q %v, want its own %q", got, err, own)
	}
	if b, err := os.ReadFile(filepath.Join(own, "etc/app")); err != nil || string(b) != "built on the builder" {
		t.Fatalf("copied etc/app: %q %v", b, err)
	}
	a, _ := os.Stat(filepath.Join(own, "etc/app"))
	l, _ := os.Stat(filepath.Join(own, "etc/app.link"))
	if !os.SameFile(a, l) {
		t.Error("a hard link was not kept")
	}
	// Once copied, the copy is used: no second fetch.
	if got, err := other.templateRootFS(ctx, gone); err != nil || got != own || oh.imports.Load() != 1 {
		t.Fatalf("second boot: %q %v, %d imports", got, err, oh.imports.Load())
	}

	// A custom version the object store does not hold: a clear error.
	missing := customVersion(t, builder, bh, false)
	missing.RootFS = "/nonexistent/rootfs"
	_, err = other.templateRootFS(ctx, missing)
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "rebuild the template") {
		t.Fatalf("no copy in the object store: %v", err)
	}
	if _, ok, _ := oh.TemplatePath(missing.ID); ok {
		t.Error("a failed copy left a rootfs")
	}

	// A platform version is built from its recipe under its own ID.
	pv := store.TemplateVersion{ID: sandbox.NewID(sandbox.PrefixTemplateVersion), Slug: "busybox", Status: store.TemplateReady, RootFS: "/elsewhere/rootfs"}
	before := oh.Builds()
	pown, _, _ := oh.TemplatePath(pv.ID)
	if got, err := other.templateRootFS(ctx, pv); err != nil || got != pown || oh.Builds() != before+1 {
		t.Fatalf("platform: %q %v (builds %d → %d), want %q", got, err, before, oh.Builds(), pown)
	}

	// A host that keeps no copies boots the recorded path as is.
	plain, _ := newServiceWith(t, &fakeHost{}, "", nil)
	if got, err := plain.templateRootFS(ctx, gone); err != nil || got != gone.RootFS {
		t.Fatalf("plain host: %q %v", got, err)
	}
}

// TestTemplateCopyOnce: concurrent boots of one version on a host that
// lacks it wait for one copy and all boot it.
func TestTemplateCopyOnce(t *testing.T) {
	ctx := context.Background()
	builder, other, bh, oh := twoHosts(t)
	v := customVersion(t, builder, bh, true)
	v.RootFS = "/gone/rootfs"
	oh.importGate = make(chan struct{})
	const n = 8
	var wg sync.WaitGroup
	paths := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i], errs[i] = other.templateRootFS(ctx, v)
		}()
	}
	for other.tplCopies.waiting(v.ID) < n {
		time.Sleep(time.Millisecond)
	}
	close(oh.importGate)
	wg.Wait()
	own, _, _ := oh.TemplatePath(v.ID)
	for i := range n {
		if errs[i] != nil || paths[i] != own {
			t.Errorf("boot %d: %q %v", i, paths[i], errs[i])
		}
	}
	if got := oh.imports.Load(); got != 1 {
		t.Errorf("%d copies made, want 1", got)
	}
}

// TestCreateOfAVersionNoHostHas: a create whose version cannot be copied
// here fails with the reason; it is not left creating.
func TestCreateOfAVersionNoHostHas(t *testing.T) {
	ctx := context.Background()
	builder, other, bh, _ := twoHosts(t)
	v := customVersion(t, builder, bh, false)
	v.RootFS = "/gone/rootfs"
	if err := other.store.PutTemplateVersion(ctx, v); err != nil {
		t.Fatal(err)
	}
	sb, err := other.Create(ctx, org, CreateRequest{Template: "app"})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := other.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if err != nil || ok || got.State != sandbox.StateFailed || !strings.Contains(got.Reason, "rebuild the template") {
		t.Fatalf("create: %s %q %v", got.State, got.Reason, err)
	}
}

// TestTemplateDeleteRemovesItsCopy: deleting a custom version removes its
// copy from the object store.
func TestTemplateDeleteRemovesItsCopy(t *testing.T) {
	ctx := context.Background()
	builder, _, bh, _ := twoHosts(t)
	v := customVersion(t, builder, bh, true)
	if err := builder.store.PutTemplateVersion(ctx, v); err != nil {
		t.Fatal(err)
	}
	key := archive.ManifestKey(templateArchiveID(v.ID))
	if _, err := builder.cfg.Objects.Stat(ctx, builder.cfg.ArchiveBucket, key); err != nil {
		t.Fatalf("after the build: %v", err)
	}
	if _, err := builder.DeleteTemplate(ctx, org, "app", v.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := builder.cfg.Objects.Stat(ctx, builder.cfg.ArchiveBucket, key); err == nil {
		t.Fatal("the copy is still in the object store")
	}
}

// TestSweepTemplateCopies: a host removes its files of versions whose
// record is gone (deleted through another ptd), and keeps those with a
// record and those changed within the sweep's grace (a build or copy that
// has not written its record yet).
func TestSweepTemplateCopies(t *testing.T) {
	ctx := context.Background()
	builder, other, bh, oh := twoHosts(t)
	kept := customVersion(t, builder, bh, true)
	if err := other.store.PutTemplateVersion(ctx, kept); err != nil {
		t.Fatal(err)
	}
	kept.RootFS = "/gone/rootfs"
	if _, err := other.templateRootFS(ctx, kept); err != nil {
		t.Fatal(err)
	}
	deleted := customVersion(t, builder, bh, true)
	deleted.RootFS = "/gone/rootfs"
	if _, err := other.templateRootFS(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	fresh := sandbox.NewID(sandbox.PrefixTemplateVersion)
	writeTree(t, filepath.Join(oh.dir, "templates", fresh, "rootfs"), map[string]string{"etc/x": "building"})
	old := time.Now().Add(-time.Hour)
	for _, id := range []string{kept.ID, deleted.ID} {
		if err := os.Chtimes(filepath.Join(oh.dir, "templates", id), old, old); err != nil {
			t.Fatal(err)
		}
	}
	got := other.sweepTemplateCopies(ctx)
	if len(got) != 1 || got[0] != deleted.ID {
		t.Errorf("swept %v, want only %s", got, deleted.ID)
	}
	for id, want := range map[string]bool{kept.ID: true, deleted.ID: false, fresh: true} {
		_, err := os.Stat(filepath.Join(oh.dir, "templates", id))
		if (err == nil) != want {
			t.Errorf("%s there: %v, want %v", id, err == nil, want)
		}
	}
}

// TestStartedStateOfAnotherHost: a create of a version whose started-state
// snapshot another host took boots cold here, saying why; one built here
// restores it.
func TestStartedStateOfAnotherHost(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, buildHost string
		restored        bool
	}{
		{"built here", "host_test", true},
		{"built elsewhere", "host_other", false},
		{"build names no host", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			specs := make(chan StartSpec, 1)
			s, st := newTestService(t, &fakeHost{StartFunc: func(ctx context.Context, spec StartSpec) (Instance, error) {
				specs <- spec
				return Instance{Address: "127.0.0.1", MemoryRestored: spec.Clone != nil}, nil
			}})
			req, _ := json.Marshal(buildRequestRecord{Kind: BuildFromImage, FromImage: "x", Snapshot: true, Host: tc.buildHost})
			now := time.Now().UTC().Truncate(time.Microsecond)
			v := store.TemplateVersion{ID: sandbox.NewID(sandbox.PrefixTemplateVersion), Slug: "app", Status: store.TemplateReady, OrgID: org.OrgID,
				BuildID: sandbox.NewID(sandbox.PrefixTemplateBuild), RootFS: "/templates/x", CreatedAt: now, UpdatedAt: now}
			v.Spec.Started = &store.StartedState{SnapshotID: sandbox.NewID(sandbox.PrefixSnapshot), CPU: 1, RAMMB: 512, DiskGB: 2, Runtime: "runc"}
			b := store.TemplateBuild{ID: v.BuildID, OrgID: org.OrgID, Slug: "app", Status: store.BuildReady, Request: string(req),
				VersionID: v.ID, CreatedAt: now, UpdatedAt: now}
			if err := st.CreateTemplateBuild(ctx, b); err != nil {
				t.Fatal(err)
			}
			if err := st.PutTemplateVersion(ctx, v); err != nil {
				t.Fatal(err)
			}
			sb, err := s.Create(ctx, org, CreateRequest{Template: "app"})
			if err != nil {
				t.Fatal(err)
			}
			got, ok, err := s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second)
			if err != nil || !ok {
				t.Fatalf("create: %s %q %v", got.State, got.Reason, err)
			}
			spec := <-specs
			if restored := spec.Clone != nil; restored != tc.restored {
				t.Fatalf("started state restored: %v, want %v (last start %+v)", restored, tc.restored, got.LastStart)
			}
			if !tc.restored && (got.LastStart == nil || !strings.Contains(got.LastStart.Reason, "on host host_other")) {
				t.Errorf("last start: %+v, want the reason", got.LastStart)
			}
		})
	}
}

// TestCollectTemplateArchives: the object store's copy of a version with
// no record is deleted once it is older than the chunk GC's grace (a build
// writes it before its record); a recorded version's copy stays.
func TestCollectTemplateArchives(t *testing.T) {
	ctx := context.Background()
	builder, _, bh, _ := twoHosts(t)
	recorded := customVersion(t, builder, bh, true)
	if err := builder.store.PutTemplateVersion(ctx, recorded); err != nil {
		t.Fatal(err)
	}
	orphan := customVersion(t, builder, bh, true)
	there := func(v store.TemplateVersion) bool {
		_, err := builder.cfg.Objects.Stat(ctx, builder.cfg.ArchiveBucket, archive.ManifestKey(templateArchiveID(v.ID)))
		return err == nil
	}
	builder.collectTemplateArchives(ctx, time.Now())
	if !there(recorded) || !there(orphan) {
		t.Fatalf("young copies: recorded %v, orphan %v; want both kept", there(recorded), there(orphan))
	}
	builder.collectTemplateArchives(ctx, time.Now().Add(archive.DefaultGCGrace+time.Hour))
	if !there(recorded) || there(orphan) {
		t.Fatalf("old copies: recorded %v, orphan %v; want the orphan's deleted", there(recorded), there(orphan))
	}
}
