package e2e

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// sixDigits is the API's time format: UTC with six fractional digits.
var sixDigits = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// TestListPagingE2E walks GET /v1/sandboxes?paginated=true by offset pages
// over sandboxes created at once: every page carries the same total, the
// pages joined are the whole list (created_at desc, then id desc) with no
// row twice or missing, and created_at has six fractional digits, so rows
// made in one millisecond still order.
func TestListPagingE2E(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	tag := "paging-" + randHex(4)
	cleanupTagged(t, c, tag)
	const n = 7
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			// No wait: the record is what is paged, not a booted sandbox.
			if r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "metadata": map[string]string{"run": tag}}); r.Status != 201 {
				t.Errorf("create: %d %s", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	type row struct {
		ID        string `json:"id"`
		CreatedAt string `json:"created_at"`
	}
	page := func(limit, offset int) ([]row, int) {
		t.Helper()
		r := c.do("GET", "/v1/sandboxes?paginated=true&metadata[run]="+tag+"&limit="+strconv.Itoa(limit)+"&offset="+strconv.Itoa(offset), nil)
		if r.Status != 200 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		var l struct {
			Rows  []row `json:"rows"`
			Total int   `json:"total"`
		}
		if err := json.Unmarshal(r.Body, &l); err != nil {
			t.Fatal(err)
		}
		return l.Rows, l.Total
	}
	all, total := page(200, 0)
	if total != n || len(all) != n {
		t.Fatalf("one page of everything: %d rows, total %d, want %d", len(all), total, n)
	}
	for i, r := range all {
		if !sixDigits.MatchString(r.CreatedAt) {
			t.Errorf("created_at %q: want six fractional digits", r.CreatedAt)
		}
		if i > 0 {
			prev := all[i-1]
			// Fixed width, so text order is time order.
			if r.CreatedAt > prev.CreatedAt || (r.CreatedAt == prev.CreatedAt && r.ID > prev.ID) {
				t.Errorf("rows out of order: %v after %v", r, prev)
			}
		}
	}
	for _, limit := range []int{1, 2, 3} {
		var joined []row
		for offset := 0; offset < n+limit; offset += limit {
			rows, total := page(limit, offset)
			if total != n {
				t.Errorf("limit %d offset %d: total %d, want %d", limit, offset, total, n)
			}
			if want := min(limit, max(n-offset, 0)); len(rows) != want {
				t.Errorf("limit %d offset %d: %d rows, want %d", limit, offset, len(rows), want)
			}
			joined = append(joined, rows...)
		}
		if !slices.Equal(joined, all) {
			t.Errorf("limit %d: pages joined\n%v\nwant\n%v", limit, joined, all)
		}
	}
}
