package daytona

import (
	"net/url"
	"slices"
	"testing"
)

// TestListFilter: each filter the SDK's daytona.list can send keeps what
// it names and drops the rest; malformed values are 400, never ignored.
func TestListFilter(t *testing.T) {
	at := func(s string) *string { return &s }
	a := sandboxDTO{ID: "sbx_aaa", Name: "Alpha", State: "started", Snapshot: "python-node", Target: "local", SandboxClass: "container",
		CPU: 1, Memory: 1, Disk: 3, Public: true, CreatedAt: "2026-01-01T00:00:00.000Z", UpdatedAt: "2026-01-02T00:00:00.000Z",
		AutoDestroyAt: at("2026-02-01T00:00:00.000Z")}
	b := sandboxDTO{ID: "sbx_bbb", Name: "beta", State: "error", Recoverable: true, Snapshot: "busybox", Target: "local", SandboxClass: "container",
		CPU: 4, Memory: 8, Disk: 10, CreatedAt: "2026-03-01T00:00:00.000Z", UpdatedAt: "2026-03-01T00:00:00.000Z",
		LastActivityAt: "2026-03-05T00:00:00.000Z"}
	for _, c := range []struct {
		query string
		want  []string // IDs kept
	}{
		{"", []string{"sbx_aaa", "sbx_bbb"}},
		{"id=SBX_A", []string{"sbx_aaa"}},
		{"name=be", []string{"sbx_bbb"}},
		{"states=started&states=stopped", []string{"sbx_aaa"}},
		{"snapshots=busybox", []string{"sbx_bbb"}},
		{"regionIds=local", []string{"sbx_aaa", "sbx_bbb"}},
		{"regionIds=eu", nil},
		{"sandboxClasses=linux-vm", nil},
		{"minCpu=2", []string{"sbx_bbb"}},
		{"maxMemoryGiB=2", []string{"sbx_aaa"}},
		{"minDiskGiB=4&maxDiskGiB=10", []string{"sbx_bbb"}},
		{"minGpu=1", nil},
		{"isPublic=true", []string{"sbx_aaa"}},
		{"isRecoverable=true", []string{"sbx_bbb"}},
		{"createdAtAfter=2026-02-01T00:00:00.000Z", []string{"sbx_bbb"}},
		{"createdAtBefore=2026-02-01T00:00:00Z", []string{"sbx_aaa"}},
		{"lastEventAfter=2026-03-04T00:00:00.000Z", []string{"sbx_bbb"}},
		{"autoDestroyAtBefore=2026-03-01T00:00:00.000Z", []string{"sbx_aaa"}},
		{"autoDestroyAtAfter=2026-01-01T00:00:00.000Z", []string{"sbx_aaa"}},
		{"includeWarm=true", []string{"sbx_aaa", "sbx_bbb"}},
	} {
		q, _ := url.ParseQuery(c.query)
		f, err := parseListFilter(q)
		if err != nil {
			t.Errorf("%s: %v", c.query, err)
			continue
		}
		var got []string
		for _, d := range []sandboxDTO{a, b} {
			if f.match(d) {
				got = append(got, d.ID)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: kept %v, want %v", c.query, got, c.want)
		}
	}
	for _, bad := range []string{"limit=0", "limit=201", "cursor=x", "minCpu=lots", "isPublic=maybe",
		"createdAtAfter=yesterday", "sort=size", "order=up", "labels={", "includeWarm=2"} {
		q, _ := url.ParseQuery(bad)
		if _, err := parseListFilter(q); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// TestListOrder: createdAt descending by default; sort and order pick
// another, ties broken by ID so pages are stable.
func TestListOrder(t *testing.T) {
	ds := []sandboxDTO{
		{ID: "sbx_2", Name: "b", CPU: 2, CreatedAt: "2026-01-02T00:00:00.000Z"},
		{ID: "sbx_1", Name: "c", CPU: 2, CreatedAt: "2026-01-01T00:00:00.000Z"},
		{ID: "sbx_3", Name: "a", CPU: 1, CreatedAt: "2026-01-03T00:00:00.000Z"},
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", []string{"sbx_3", "sbx_2", "sbx_1"}},
		{"order=asc", []string{"sbx_1", "sbx_2", "sbx_3"}},
		{"sort=name&order=asc", []string{"sbx_3", "sbx_2", "sbx_1"}},
		{"sort=cpu&order=asc", []string{"sbx_3", "sbx_1", "sbx_2"}},
	} {
		q, _ := url.ParseQuery(c.query)
		f, _ := parseListFilter(q)
		got := slices.Clone(ds)
		slices.SortFunc(got, f.compare)
		var ids []string
		for _, d := range got {
			ids = append(ids, d.ID)
		}
		if !slices.Equal(ids, c.want) {
			t.Errorf("%q: %v, want %v", c.query, ids, c.want)
		}
	}
}
