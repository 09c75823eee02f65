package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/store"
)

// testFeeds pins the org-scoped event feed, webhook cursors and
// deliveries, and artifact records.
func testFeeds(t *testing.T, s store.Store) {
	ctx := context.Background()
	add := func(org, sbx, typ string) {
		t.Helper()
		if err := s.AddEvent(ctx, org, sbx, typ, nil); err != nil {
			t.Fatal(err)
		}
	}
	add("org_a", "sbx_1", "t1")
	add("org_b", "sbx_2", "t1")
	add("org_a", "sbx_3", "t2")

	types := func(evs []store.Event) []string {
		out := []string{}
		for _, e := range evs {
			out = append(out, e.OrgID+"/"+e.SandboxID+"/"+e.Type)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    store.EventQuery
		want []string
	}{
		{"org", store.EventQuery{OrgID: "org_a"}, []string{"org_a/sbx_1/t1", "org_a/sbx_3/t2"}},
		{"other org", store.EventQuery{OrgID: "org_b"}, []string{"org_b/sbx_2/t1"}},
		{"sandbox", store.EventQuery{OrgID: "org_a", SandboxID: "sbx_3"}, []string{"org_a/sbx_3/t2"}},
		{"types", store.EventQuery{OrgID: "org_a", Types: []string{"t1", "zz"}}, []string{"org_a/sbx_1/t1"}},
		{"limit", store.EventQuery{OrgID: "org_a", Limit: 1}, []string{"org_a/sbx_1/t1"}},
		{"no org matches nothing", store.EventQuery{}, []string{}},
	} {
		got, err := s.ListEvents(ctx, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, types(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	all, _ := s.ListEvents(ctx, store.EventQuery{OrgID: "org_a"})
	after, _ := s.ListEvents(ctx, store.EventQuery{OrgID: "org_a", AfterID: all[0].ID})
	if diff := cmp.Diff([]string{"org_a/sbx_3/t2"}, types(after)); diff != "" {
		t.Errorf("after cursor (-want +got):\n%s", diff)
	}

	// A webhook starts at the newest event: it never receives history.
	w, err := s.CreateWebhook(ctx, store.Webhook{ID: "whk_1", OrgID: "org_a", URL: "https://example.com", Secret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if w.Cursor != all[1].ID || w.Events == nil || w.CreatedAt.IsZero() {
		t.Fatalf("created webhook = %+v, want cursor %d", w, all[1].ID)
	}
	if _, err := s.CreateWebhook(ctx, w); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate webhook: %v, want conflict", err)
	}
	got, err := s.GetWebhook(ctx, "org_a", "whk_1")
	wantCreated(t, "GetWebhook", w, got, err)
	if _, err := s.GetWebhook(ctx, "org_b", "whk_1"); !store.IsNotFound(err) {
		t.Errorf("other org's webhook: %v, want not found", err)
	}
	if ws, _ := s.ListWebhooks(ctx, "org_b"); len(ws) != 0 {
		t.Errorf("org_b lists %d webhooks", len(ws))
	}
	if ws, _ := s.ListWebhooks(ctx, ""); len(ws) != 1 {
		t.Errorf("all orgs list %d webhooks, want 1", len(ws))
	}

	add("org_a", "sbx_1", "t3")
	evs, _ := s.ListEvents(ctx, store.EventQuery{OrgID: "org_a", AfterID: w.Cursor})
	if len(evs) != 1 {
		t.Fatalf("new events = %v", evs)
	}
	if err := s.AdvanceWebhook(ctx, "whk_1", w.Cursor+100, evs[0].ID, []int64{evs[0].ID}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("advance from a stale cursor: %v, want conflict", err)
	}
	if err := s.AdvanceWebhook(ctx, "whk_1", w.Cursor, evs[0].ID, []int64{evs[0].ID}); err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceWebhook(ctx, "whk_nope", 0, 1, nil); !store.IsNotFound(err) {
		t.Errorf("advance a missing webhook: %v, want not found", err)
	}
	due, err := s.DueDeliveries(ctx, time.Now().Add(time.Second), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].Status != store.DeliveryPending || due[0].Event.Type != "t3" || due[0].EventID != evs[0].ID || due[0].OrgID != "org_a" {
		t.Fatalf("due = %+v", due)
	}
	d := due[0]
	d.Attempts, d.LastStatus, d.LastError, d.NextAttemptAt = 1, 503, "receiver answered 503", time.Now().Add(time.Hour)
	if err := s.UpdateDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.DueDeliveries(ctx, time.Now(), 10); len(due) != 0 {
		t.Errorf("a delivery backing off is due: %+v", due)
	}
	if due, _ := s.DueDeliveries(ctx, time.Now().Add(2*time.Hour), 10); len(due) != 1 || due[0].Attempts != 1 {
		t.Errorf("after its backoff: %+v", due)
	}
	d.Status = store.DeliveryDelivered
	if err := s.UpdateDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	ds, err := s.ListDeliveries(ctx, "org_a", "whk_1", 0)
	if err != nil || len(ds) != 1 || ds[0].Status != store.DeliveryDelivered || ds[0].LastStatus != 503 {
		t.Errorf("ListDeliveries = %+v, %v", ds, err)
	}
	if n, err := s.PruneDeliveries(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Errorf("prune of recent deliveries = %d, %v; want 0", n, err)
	}
	if n, err := s.PruneDeliveries(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Errorf("prune of finished deliveries = %d, %v; want 1", n, err)
	}
	if ds, _ := s.ListDeliveries(ctx, "org_a", "whk_1", 0); len(ds) != 0 {
		t.Errorf("after prune: %+v", ds)
	}
	if _, err := s.ListDeliveries(ctx, "org_b", "whk_1", 0); !store.IsNotFound(err) {
		t.Errorf("other org's deliveries: %v, want not found", err)
	}
	if err := s.DeleteWebhook(ctx, "org_b", "whk_1"); !store.IsNotFound(err) {
		t.Errorf("delete another org's webhook: %v, want not found", err)
	}
	if err := s.DeleteWebhook(ctx, "org_a", "whk_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateDelivery(ctx, d); !store.IsNotFound(err) {
		t.Errorf("a deleted webhook's delivery: %v, want not found", err)
	}

	// Artifacts.
	a := store.Artifact{ID: "art_1", OrgID: "org_a", SandboxID: "sbx_1", Name: "out.txt", Path: "/tmp/out.txt",
		Kind: store.ArtifactFile, ContentType: "text/plain", SizeBytes: 5, SHA256: "abc", Bucket: "b", Key: "k/1"}
	ca, err := s.CreateArtifact(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateArtifact(ctx, a); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate artifact: %v, want conflict", err)
	}
	b := a
	b.ID, b.SandboxID, b.Kind, b.CreatedAt = "art_2", "sbx_3", store.ArtifactDirectory, ca.CreatedAt.Add(time.Second)
	if _, err := s.CreateArtifact(ctx, b); err != nil {
		t.Fatal(err)
	}
	ga, err := s.GetArtifact(ctx, "org_a", "art_1")
	wantCreated(t, "GetArtifact", ca, ga, err)
	if _, err := s.GetArtifact(ctx, "org_b", "art_1"); !store.IsNotFound(err) {
		t.Errorf("other org's artifact: %v, want not found", err)
	}
	ids := func(as []store.Artifact) []string {
		return idsOf(as, func(a *store.Artifact) string { return a.ID })
	}
	for _, tc := range []struct {
		org, sbx string
		want     []string
	}{{"org_a", "", []string{"art_2", "art_1"}}, {"org_a", "sbx_1", []string{"art_1"}}, {"org_b", "", []string{}}} {
		got, err := s.ListArtifacts(ctx, tc.org, tc.sbx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
			t.Errorf("ListArtifacts(%s, %q) (-want +got):\n%s", tc.org, tc.sbx, diff)
		}
	}
	if _, err := s.DeleteArtifact(ctx, "org_b", "art_1"); !store.IsNotFound(err) {
		t.Errorf("delete another org's artifact: %v, want not found", err)
	}
	da, err := s.DeleteArtifact(ctx, "org_a", "art_1")
	if err != nil || da.Key != "k/1" {
		t.Fatalf("DeleteArtifact = %+v, %v", da, err)
	}
	if _, err := s.GetArtifact(ctx, "org_a", "art_1"); !store.IsNotFound(err) {
		t.Errorf("deleted artifact: %v, want not found", err)
	}
}
