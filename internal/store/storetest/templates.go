package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

func testCustomTemplateVersions(t *testing.T, s store.Store) {
	ctx := t.Context()
	custom := store.TemplateVersion{
		ID: sandbox.NewID(sandbox.PrefixTemplateVersion), Slug: "app", Status: store.TemplateReady, OrgID: "org_a",
		BuildID: sandbox.NewID(sandbox.PrefixTemplateBuild), RootFS: "/x/rootfs", CreatedAt: base, UpdatedAt: base,
		Spec: store.TemplateSpec{
			Settings: store.TemplateSettings{StartCmd: []string{"/bin/sh", "-c", "serve"}, ReadyCmd: []string{"true"},
				ReadyTimeoutMs: 5000, Env: map[string]string{"A": "1"}, User: "1000:1000", Workdir: "/srv", CPU: 1.5, RAMMB: 512,
				DiskGB: 2, Runtime: "gvisor", Labels: map[string]string{"l": "v"}, ExposedPorts: []string{"8080/tcp"}},
			Source:  store.TemplateSource{Kind: "image", Image: "r/app:1", ImageDigest: "sha256:ab"},
			Layers:  []string{"sha256:01", "sha256:02"},
			Started: &store.StartedState{SnapshotID: "snap_x", MemoryImage: "/m", AgentToken: "t", CPU: 1.5, RAMMB: 512, DiskGB: 2, Runtime: "gvisor"},
		},
	}
	older := custom
	older.ID, older.CreatedAt, older.UpdatedAt, older.Spec = sandbox.NewID(sandbox.PrefixTemplateVersion), base.Add(-time.Hour), base.Add(-time.Hour), store.TemplateSpec{}
	other := custom
	other.ID, other.OrgID = sandbox.NewID(sandbox.PrefixTemplateVersion), "org_b"
	platform := store.TemplateVersion{ID: sandbox.NewID(sandbox.PrefixTemplateVersion), Slug: "app", Status: store.TemplateReady,
		CreatedAt: base.Add(time.Hour), UpdatedAt: base.Add(time.Hour)}
	for _, v := range []store.TemplateVersion{custom, older, other, platform} {
		wantErr(t, "PutTemplateVersion", s.PutTemplateVersion(ctx, v), nil)
	}
	got, err := s.GetTemplateVersion(ctx, custom.ID)
	wantErr(t, "GetTemplateVersion", err, nil)
	if diff := cmp.Diff(custom, got); diff != "" {
		t.Errorf("custom version round trip (-want +got):\n%s", diff)
	}
	list, err := s.ListTemplateVersionsOf(ctx, "org_a", "app")
	wantErr(t, "ListTemplateVersionsOf", err, nil)
	if diff := cmp.Diff([]string{custom.ID, older.ID}, versionIDs(list)); diff != "" {
		t.Errorf("org_a's versions newest first (-want +got):\n%s", diff)
	}
	if list, _ := s.ListTemplateVersionsOf(ctx, "org_a", ""); len(list) != 2 {
		t.Errorf("org_a's versions of every slug: %v", versionIDs(list))
	}
	if list, _ := s.ListTemplateVersionsOf(ctx, "", "app"); len(list) != 1 || list[0].ID != platform.ID {
		t.Errorf("platform versions: %v", versionIDs(list))
	}
	// LatestTemplateVersion is the platform's: an org's newer version of
	// the same slug never shows there.
	latest, err := s.LatestTemplateVersion(ctx, "app")
	wantErr(t, "LatestTemplateVersion", err, nil)
	if latest.ID != platform.ID {
		t.Errorf("LatestTemplateVersion = %s, want the platform's %s", latest.ID, platform.ID)
	}
	wantErr(t, "DeleteTemplateVersion", s.DeleteTemplateVersion(ctx, older.ID), nil)
	wantErr(t, "DeleteTemplateVersion again", s.DeleteTemplateVersion(ctx, older.ID), nil)
	_, err = s.GetTemplateVersion(ctx, older.ID)
	wantErr(t, "GetTemplateVersion deleted", err, store.ErrNotFound)
}

func versionIDs(vs []store.TemplateVersion) []string {
	return idsOf(vs, func(v *store.TemplateVersion) string { return v.ID })
}

func testTemplateBuilds(t *testing.T, s store.Store) {
	ctx := t.Context()
	b := store.TemplateBuild{ID: sandbox.NewID(sandbox.PrefixTemplateBuild), OrgID: "org_a", Slug: "app",
		Status: store.BuildRunning, Request: `{"from_image":"x"}`, BoxID: "sbx_1", CreatedAt: base, UpdatedAt: base}
	wantErr(t, "CreateTemplateBuild", s.CreateTemplateBuild(ctx, b), nil)
	wantErr(t, "CreateTemplateBuild again", s.CreateTemplateBuild(ctx, b), store.ErrConflict)
	got, err := s.GetTemplateBuild(ctx, "org_a", b.ID)
	wantRead(t, "GetTemplateBuild", err, nil, b, got)
	_, err = s.GetTemplateBuild(ctx, "org_b", b.ID)
	wantErr(t, "GetTemplateBuild other org", err, store.ErrNotFound)

	exit := 2
	fin := base.Add(time.Minute)
	b.Status, b.Error, b.BoxID, b.FinishedAt = store.BuildFailed, "step 3: exit 2", "", &fin
	b.Failure = &store.BuildFailure{Step: 3, Steps: 5, Line: 4, Instruction: "RUN false", ExitCode: &exit}
	b.Log = []byte("{\"type\":\"step\"}\n")
	wantErr(t, "UpdateTemplateBuild", s.UpdateTemplateBuild(ctx, b), nil)
	got, err = s.GetTemplateBuild(ctx, "", b.ID)
	wantErr(t, "GetTemplateBuild", err, nil)
	if got.UpdatedAt.Before(base) {
		t.Errorf("UpdatedAt not moved: %v", got.UpdatedAt)
	}
	got.UpdatedAt = b.UpdatedAt
	if diff := cmp.Diff(b, got); diff != "" {
		t.Errorf("after update (-want +got):\n%s", diff)
	}
	missing := b
	missing.ID = sandbox.NewID(sandbox.PrefixTemplateBuild)
	wantErr(t, "UpdateTemplateBuild absent", s.UpdateTemplateBuild(ctx, missing), store.ErrNotFound)

	second := store.TemplateBuild{ID: sandbox.NewID(sandbox.PrefixTemplateBuild), OrgID: "org_a", Slug: "web",
		Status: store.BuildRunning, Request: "{}", CreatedAt: base.Add(time.Second)}
	wantErr(t, "CreateTemplateBuild", s.CreateTemplateBuild(ctx, second), nil)
	all, err := s.ListTemplateBuilds(ctx, store.BuildFilter{OrgID: "org_a"})
	wantErr(t, "ListTemplateBuilds", err, nil)
	if len(all) != 2 || all[0].ID != second.ID || all[1].Log != nil {
		t.Errorf("ListTemplateBuilds = %+v, want newest first without logs", all)
	}
	running, _ := s.ListTemplateBuilds(ctx, store.BuildFilter{Status: store.BuildRunning})
	if len(running) != 1 || running[0].ID != second.ID {
		t.Errorf("running builds = %+v", running)
	}
	bySlug, _ := s.ListTemplateBuilds(ctx, store.BuildFilter{OrgID: "org_a", Slug: "app", Status: store.BuildFailed})
	if len(bySlug) != 1 || bySlug[0].ID != b.ID {
		t.Errorf("filtered builds = %+v", bySlug)
	}
}

func testBuildCache(t *testing.T, s store.Store) {
	ctx := t.Context()
	e1 := store.BuildCacheEntry{OrgID: "org_a", Key: "k1", SnapshotID: "snap_1", CreatedAt: base, UsedAt: base.Add(time.Minute)}
	e2 := store.BuildCacheEntry{OrgID: "org_a", Key: "k2", SnapshotID: "snap_2", Ready: true, CreatedAt: base, UsedAt: base}
	e3 := store.BuildCacheEntry{OrgID: "org_b", Key: "k1", SnapshotID: "snap_3", Ready: true, CreatedAt: base, UsedAt: base}
	for _, e := range []store.BuildCacheEntry{e1, e2, e3} {
		wantErr(t, "PutBuildCache", s.PutBuildCache(ctx, e), nil)
	}
	e1.Ready, e1.UsedAt = true, base.Add(2*time.Minute)
	wantErr(t, "PutBuildCache replace", s.PutBuildCache(ctx, e1), nil)
	got, err := s.GetBuildCache(ctx, "org_a", "k1")
	wantRead(t, "GetBuildCache", err, nil, e1, got)
	_, err = s.GetBuildCache(ctx, "org_c", "k1")
	wantErr(t, "GetBuildCache other org", err, store.ErrNotFound)
	list, err := s.ListBuildCache(ctx, "org_a")
	wantErr(t, "ListBuildCache", err, nil)
	if diff := cmp.Diff([]store.BuildCacheEntry{e2, e1}, list); diff != "" {
		t.Errorf("ListBuildCache least recently used first (-want +got):\n%s", diff)
	}
	if all, _ := s.ListBuildCache(ctx, ""); len(all) != 3 {
		t.Errorf("every org's entries: %d", len(all))
	}
	wantErr(t, "DeleteBuildCache", s.DeleteBuildCache(ctx, "org_a", "k1"), nil)
	wantErr(t, "DeleteBuildCache again", s.DeleteBuildCache(ctx, "org_a", "k1"), nil)
	_, err = s.GetBuildCache(ctx, "org_a", "k1")
	wantErr(t, "GetBuildCache deleted", err, store.ErrNotFound)
	if _, err := s.GetBuildCache(ctx, "org_b", "k1"); err != nil {
		t.Errorf("another org's entry went with it: %v", err)
	}
}

func testRegistryCredentials(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := store.RegistryCredential{OrgID: "org_a", Registry: "ghcr.io", Username: "bob", Sealed: []byte{1, 2, 3},
		Kind: "basic", CreatedAt: base, UpdatedAt: base}
	wantErr(t, "PutRegistryCredential", s.PutRegistryCredential(ctx, c), nil)
	got, err := s.GetRegistryCredential(ctx, "org_a", "ghcr.io")
	wantRead(t, "GetRegistryCredential", err, nil, c, got)
	c2 := c
	c2.Username, c2.Sealed, c2.Kind, c2.CreatedAt, c2.UpdatedAt = "", []byte{9}, "token", base.Add(time.Hour), base.Add(time.Hour)
	wantErr(t, "PutRegistryCredential replace", s.PutRegistryCredential(ctx, c2), nil)
	got, _ = s.GetRegistryCredential(ctx, "org_a", "ghcr.io")
	c2.CreatedAt = base // a replace keeps CreatedAt
	if diff := cmp.Diff(c2, got); diff != "" {
		t.Errorf("after replace (-want +got):\n%s", diff)
	}
	_, err = s.GetRegistryCredential(ctx, "org_b", "ghcr.io")
	wantErr(t, "GetRegistryCredential other org", err, store.ErrNotFound)
	wantErr(t, "PutRegistryCredential", s.PutRegistryCredential(ctx, store.RegistryCredential{OrgID: "org_a",
		Registry: "docker.io", Sealed: []byte{4}, Kind: "basic"}), nil)
	list, err := s.ListRegistryCredentials(ctx, "org_a")
	wantErr(t, "ListRegistryCredentials", err, nil)
	if len(list) != 2 || list[0].Registry != "docker.io" || list[1].Registry != "ghcr.io" {
		t.Errorf("ListRegistryCredentials = %+v", list)
	}
	wantErr(t, "DeleteRegistryCredential", s.DeleteRegistryCredential(ctx, "org_a", "ghcr.io"), nil)
	wantErr(t, "DeleteRegistryCredential again", s.DeleteRegistryCredential(ctx, "org_a", "ghcr.io"), store.ErrNotFound)
}
