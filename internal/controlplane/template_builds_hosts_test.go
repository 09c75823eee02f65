package controlplane

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// TestInterruptedBuildsOfOtherHosts: a ptd starting on a shared store
// fails the running builds it was running itself (or that name no host,
// or a host that is lost or unknown), and leaves those another live host
// runs.
func TestInterruptedBuildsOfOtherHosts(t *testing.T) {
	s, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	registerOtherHosts(t, st)
	builds := map[string]string{} // build ID → the host its record names
	for _, host := range []string{s.host.ID(), "host_other", "host_gone", "host_unknown", ""} {
		req, _ := json.Marshal(buildRequestRecord{Kind: BuildFromImage, FromImage: "x", Host: host})
		now := time.Now().UTC().Truncate(time.Microsecond)
		b := store.TemplateBuild{ID: sandbox.NewID(sandbox.PrefixTemplateBuild), OrgID: org.OrgID, Slug: "app", Status: store.BuildRunning,
			Request: string(req), VersionID: sandbox.NewID(sandbox.PrefixTemplateVersion), CreatedAt: now, UpdatedAt: now}
		if err := st.CreateTemplateBuild(ctx, b); err != nil {
			t.Fatal(err)
		}
		builds[b.ID] = host
	}
	if err := s.failInterruptedTemplateBuilds(ctx); err != nil {
		t.Fatal(err)
	}
	for id, host := range builds {
		got, err := st.GetTemplateBuild(ctx, "", id)
		want := store.BuildFailed
		if host == "host_other" {
			want = store.BuildRunning
		}
		if err != nil || got.Status != want {
			t.Errorf("build on %q after a start: %s %v, want %s", host, got.Status, err, want)
		}
	}
}

// TestInterruptedPlatformBuildsOfOtherHosts: a ptd starting on a shared
// store fails the platform template versions left building by its own
// host (or naming no host, or a host that is lost or unknown), and leaves
// those another live host is building; a build records its host.
func TestInterruptedPlatformBuildsOfOtherHosts(t *testing.T) {
	s, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	registerOtherHosts(t, st)
	versions := map[string]string{} // version ID → the host its record names
	for _, host := range []string{s.host.ID(), "host_other", "host_gone", "host_unknown", ""} {
		now := time.Now().UTC().Truncate(time.Microsecond)
		v := store.TemplateVersion{ID: sandbox.NewID(sandbox.PrefixTemplateVersion), Slug: "busybox", Status: store.TemplateBuilding,
			Progress: "starting", CreatedAt: now, UpdatedAt: now, HostID: host}
		if err := st.PutTemplateVersion(ctx, v); err != nil {
			t.Fatal(err)
		}
		versions[v.ID] = host
	}
	if err := s.tpl.failInterruptedBuilds(ctx); err != nil {
		t.Fatal(err)
	}
	for id, host := range versions {
		got, err := st.GetTemplateVersion(ctx, id)
		want := store.TemplateFailed
		if host == "host_other" {
			want = store.TemplateBuilding
		}
		if err != nil || got.Status != want {
			t.Errorf("version built on %q after a start: %s %v, want %s", host, got.Status, err, want)
		}
	}

	// A build records the host that runs it.
	if _, err := s.BuildTemplate(ctx, "busybox"); err != nil {
		t.Fatal(err)
	}
	v, err := st.LatestTemplateVersion(ctx, "busybox")
	if err != nil || v.HostID != s.host.ID() {
		t.Fatalf("a platform build's version = %+v, %v; want host %s", v, err, s.host.ID())
	}
}

// TestBuildRecordNamesItsHost pins the field of a build's request that
// names its building host: forward reads it to send a running build's
// log request to that host (docs/ARCHITECTURE.md, "Many hosts").
func TestBuildRecordNamesItsHost(t *testing.T) {
	b, _ := json.Marshal(buildRequestRecord{Kind: BuildFromImage, FromImage: "x", Host: "host_b"})
	var rec struct {
		Host string `json:"host"`
	}
	if json.Unmarshal(b, &rec) != nil || rec.Host != "host_b" {
		t.Fatalf("a build's request %s does not name its host as \"host\"", b)
	}
}

// registerOtherHosts registers two hosts besides the service's own:
// host_other, live, and host_gone, lost. The builds' owners in these tests
// are those, the service's host, an unknown one, or none.
func registerOtherHosts(t *testing.T, st store.Store) {
	t.Helper()
	ctx := context.Background()
	for _, id := range []string{"host_other", "host_gone"} {
		if _, err := st.RegisterHost(ctx, store.HostRecord{ID: id, URL: "http://" + id + ".invalid"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.SetHostState(ctx, "host_gone", 0, store.HostLost, "test"); err != nil {
		t.Fatal(err)
	}
}
