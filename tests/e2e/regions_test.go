package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/region"
	"github.com/platinum-dev/platinum/internal/region/listmerge"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// startRegions starts one ptd per region name, each with a SQLite store
// of its own, the same admin token, its --region and a --region-peer for
// every other: two regions of one API on this machine.
func startRegions(t *testing.T, names ...string) []*ptdtest.Daemon {
	t.Helper()
	token := "pt_test_" + randHex(16)
	addrs := make([]string, len(names))
	for i := range names {
		var err error
		if addrs[i], err = ptdtest.FreeAddr(); err != nil {
			t.Fatal(err)
		}
	}
	var ds []*ptdtest.Daemon
	for i, name := range names {
		args := []string{"--region", name, "--pids-limit", "256"}
		for j, peer := range names {
			if j != i {
				args = append(args, "--region-peer", peer+"=http://"+addrs[j])
			}
		}
		d := startNamed(t, name, ptdtest.Options{Store: "sqlite", Token: token, Listen: addrs[i], ExtraArgs: args})
		ds = append(ds, d)
	}
	return ds
}

// regionList is GET /v1/sandboxes?query through d: the row ids in order,
// and total when the query asks for it.
func regionList(t *testing.T, d *ptdtest.Daemon, query string, hdr http.Header) ([]string, int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, d.URL+"/v1/sandboxes?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Authorization", "Bearer "+d.Token)
	r, err := ptdtest.Send(nil, req)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("list %s through %s: %v %d %s", query, d.URL, err, r.Status, r.Body)
	}
	var body struct {
		Rows []struct {
			ID string `json:"id"`
		} `json:"rows"`
		Total int `json:"total"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, row := range body.Rows {
		ids = append(ids, row.ID)
	}
	return ids, body.Total
}

// TestRegions: two regions on one machine, each a ptd with its own store,
// told of the other with --region-peer. Creates for both regions go
// through region a's API; the list through either entry is every
// sandbox in created_at (six digits), then id, order; every offset page
// with limits 1, 2 and 3 concatenates to that list; the paginated total
// is the sum of the regions'; a region-b sandbox is read, exec'd and
// deleted through region a; a create for an unknown region is 400
// unknown_region and makes nothing. E2B's, Daytona's and MCP's lists
// through a are both regions' sandboxes (E2B's and Daytona's pages walked
// with their own cursors), their requests for a region-b sandbox reach
// it, and with b down their lists are 503 region_unavailable.
func TestRegions(t *testing.T) {
	requireEnv(t)
	ds := startRegions(t, "ra", "rb")
	a, b := ds[0], ds[1]
	ctx := context.Background()
	cla, clb := platinum.New(a.URL, a.Token), platinum.New(b.URL, b.Token)

	var rows []listmerge.Row
	inRegion := map[string]string{}
	for i, want := range []string{"", "rb", "ra", "rb", "", "rb"} {
		sb, err := cla.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Region: want,
			Metadata: map[string]string{"n": fmt.Sprint(i)}}, platinum.WaitForRunning(2*time.Minute))
		if err != nil {
			t.Fatalf("create %d (region %q) through a: %v", i, want, err)
		}
		t.Cleanup(func() { cla.Sandboxes.Delete(context.Background(), sb.ID) })
		if got := cmpOr(want, "ra"); sb.Region != got {
			t.Fatalf("create %d asked region %q: record says %q, want %q", i, want, sb.Region, got)
		}
		// The record is in its region's store: that region's own entry
		// reads it without crossing.
		own := map[string]*platinum.Client{"ra": cla, "rb": clb}[sb.Region]
		if got, err := own.Sandboxes.Get(ctx, sb.ID); err != nil || got.Region != sb.Region {
			t.Fatalf("get %s through its own region %s: %+v %v", sb.ID, sb.Region, got, err)
		}
		rows = append(rows, listmerge.Row{CreatedAt: sb.CreatedAt, ID: sb.ID})
		inRegion[sb.ID] = sb.Region
	}
	slices.SortFunc(rows, listmerge.Compare)
	want := make([]string, len(rows))
	for i, r := range rows {
		want[i] = r.ID
	}

	for _, d := range ds {
		got, total := regionList(t, d, "limit=200&paginated=true", nil)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("list through %s (-want +got):\n%s", d.URL, diff)
		}
		if total != len(want) {
			t.Errorf("paginated total through %s = %d, want %d", d.URL, total, len(want))
		}
		for _, limit := range []int{1, 2, 3} {
			var walked []string
			for offset := 0; offset < len(want)+limit; offset += limit {
				page, _ := regionList(t, d, fmt.Sprintf("limit=%d&offset=%d", limit, offset), nil)
				walked = append(walked, page...)
			}
			if diff := cmp.Diff(want, walked); diff != "" {
				t.Errorf("offset pages of %d through %s (-want +got):\n%s", limit, d.URL, diff)
			}
		}
	}
	// Each region's own total, asked as a peer region asks it, adds up to
	// the merged one.
	sum := 0
	for _, d := range ds {
		_, n := regionList(t, d, "limit=1&paginated=true", http.Header{region.Header: {"test"}})
		sum += n
	}
	if sum != len(want) {
		t.Errorf("regions' own totals add up to %d, want %d", sum, len(want))
	}

	i := slices.IndexFunc(want, func(id string) bool { return inRegion[id] == "rb" })
	id := want[i]
	res, err := cla.Sandboxes.Exec(ctx, id, platinum.ExecRequest{Shell: "echo from-b"})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "from-b" {
		t.Fatalf("exec of region b's %s through a: %+v %v", id, res, err)
	}
	if got, err := cla.Sandboxes.Get(ctx, id); err != nil || got.ID != id || got.Region != "rb" {
		t.Fatalf("get of region b's %s through a: %+v %v", id, got, err)
	}
	// E2B's, Daytona's and MCP's lists through a merge both regions, and
	// their requests for b's sandbox reach it.
	others := slices.DeleteFunc(slices.Clone(want), func(o string) bool { return inRegion[o] != "rb" || o == id })
	checkCompatRegions(t, a, b, want, id, others[0], others[1])
	// E2B's snapshots of sandboxes in both regions, listed by the SDK
	// through a: one list, newest first, paged across regions.
	var snaps []string
	for _, sid := range []string{want[slices.IndexFunc(want, func(id string) bool { return inRegion[id] == "ra" })], others[1], others[1]} {
		own := map[string]*platinum.Client{"ra": cla, "rb": clb}[inRegion[sid]]
		sn, err := own.Sandboxes.Snapshot(ctx, sid, platinum.SnapshotOptions{Memory: new(false)})
		if err != nil {
			t.Fatalf("snapshot %s: %v", sid, err)
		}
		t.Cleanup(func() { own.Sandboxes.DeleteSnapshot(context.Background(), sn.ID) })
		snaps = append(snaps, sn.ID)
	}
	slices.SortFunc(snaps, func(x, y string) int { return strings.Compare(y, x) })
	checkSDKRegions(t, a, want, others[1], snaps)

	// A child named through a, of b's sandbox, is made in b beside its
	// parent.
	child, err := cla.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", ParentID: id})
	if err != nil || child.Region != "rb" || child.ParentID != id {
		t.Fatalf("child of region b's %s through a: %+v %v, want it in rb", id, child, err)
	}
	if got, err := clb.Sandboxes.Get(ctx, child.ID); err != nil || got.ParentID != id {
		t.Fatalf("the child %s through its own region rb: %+v %v", child.ID, got, err)
	}
	if _, err := cla.Sandboxes.Delete(ctx, child.ID); err != nil { // before its parent's delete below
		t.Fatalf("delete of the child %s through a: %v", child.ID, err)
	}

	_, err = cla.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Region: "nowhere"})
	var apiErr *platinum.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "unknown_region" {
		t.Fatalf("create in an unknown region: %v, want 400 unknown_region", err)
	}
	if got, total := regionList(t, a, "limit=200&paginated=true", nil); total != len(want) || !slices.Equal(got, want) {
		t.Fatalf("after the unknown region's create: %d rows %v, want %v", total, got, want)
	}

	// A create for region b with an Idempotency-Key is one sandbox, through
	// either region's entry: the key is b's store's.
	key := "regions-" + randHex(8)
	first, err := cla.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Region: "rb", IdempotencyKey: key})
	if err != nil {
		t.Fatalf("keyed create for rb through a: %v", err)
	}
	t.Cleanup(func() { cla.Sandboxes.Delete(context.Background(), first.ID) })
	again, err := clb.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Region: "rb", IdempotencyKey: key})
	if err != nil || again.ID != first.ID || first.Region != "rb" {
		t.Fatalf("same key through b: %+v %v, want %s of rb", again, err, first.ID)
	}

	if _, err := cla.Sandboxes.Delete(ctx, id); err != nil {
		t.Fatalf("delete of region b's %s through a: %v", id, err)
	}
	got, err := clb.Sandboxes.Get(ctx, id)
	if err == nil && got.State != platinum.State("deleting") && got.State != platinum.State("deleted") {
		t.Fatalf("region b's %s after a delete through a: %s", id, got.State)
	}
	if ids, _ := regionList(t, b, "limit=200", nil); slices.Contains(ids, id) {
		t.Fatalf("deleted %s still listed: %v", id, ids)
	}

	// Region b down: a's list is 503 region_unavailable naming it (never
	// a list without b's rows), and a b sandbox is 503, not 404; a's own
	// sandboxes still answer.
	b.Kill()
	r := cla.Sandboxes
	// A deadline shorter than Retry-After: the SDK hands back the 503 at
	// once instead of retrying.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := r.List(ctx, platinum.ListOptions{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable ||
		apiErr.Code != "region_unavailable" || apiErr.Body["region"] != "rb" {
		t.Fatalf("list with rb down: %v, want 503 region_unavailable naming rb", err)
	}
	checkCompatRegionDown(t, a)
	if _, err := r.Get(ctx, first.ID); !errors.As(err, &apiErr) || apiErr.Code != "region_unavailable" {
		t.Fatalf("get of an rb sandbox with rb down: %v, want 503 region_unavailable", err)
	}
	ownA := want[slices.IndexFunc(want, func(id string) bool { return inRegion[id] == "ra" })]
	if _, err := r.Get(ctx, ownA); err != nil {
		t.Fatalf("get of a's own %s with rb down: %v", ownA, err)
	}
	if err := b.Restart(); err != nil { // so its cleanup deletes and resets as usual
		t.Fatal(err)
	}
}

// cmpOr is the first of a, b that is not empty.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
