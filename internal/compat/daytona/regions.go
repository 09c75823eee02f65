package daytona

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/platinum-dev/platinum/internal/region"
)

// RegionLists are Daytona's sandbox lists answered with every region's
// sandboxes (docs/daytona.md, "Regions"): GET /sandbox and its
// /sandbox/paginated alias, merged in the order sort and order ask for,
// the cursor an offset into that merge.
func RegionLists() []region.List {
	var ls []region.List
	for _, path := range []string{APIPrefix + "/sandbox", APIPrefix + "/sandbox/paginated"} {
		ls = append(ls, region.NewList(http.MethodGet, path, validList, listPart, mergeList))
	}
	return ls
}

// RegionCreates are Daytona's creates, whose target names the region
// to make the sandbox in (docs/daytona.md, "Regions"): one naming a peer
// region goes there; any other is made here.
func RegionCreates() []region.Create {
	return []region.Create{{Path: APIPrefix + "/sandbox", Region: "target"}}
}

// validList reports whether the list's query is one Daytona's list
// accepts; one it refuses is answered by this region alone.
func validList(in *http.Request) bool {
	_, err := parseListFilter(in.URL.Query())
	return err == nil
}

// regionItems is what one region gives a list page: its first
// cursor+limit items in the list's order, and whether it has more.
type regionItems struct {
	items []listItem
	more  bool
}

// listItem is an item as its region wrote it, and the fields it is
// ordered by.
type listItem struct {
	dto sandboxDTO
	raw json.RawMessage
}

// maxPage is the largest page a region serves (the list's limit bound).
const maxPage = 200

// listPart reads a region's first cursor+limit items, a page of at most
// maxPage at a time: any item of the merged page is among its region's
// first cursor+limit.
func listPart(in *http.Request, get region.Get) (regionItems, error) {
	q := in.URL.Query()
	f, _ := parseListFilter(q) // valid: validList passed it
	n := f.cursor + f.limit
	var part regionItems
	for len(part.items) < n {
		page := min(maxPage, n-len(part.items))
		pq := maps.Clone(q) // Set replaces values, never edits them
		pq.Set("cursor", strconv.Itoa(len(part.items)))
		pq.Set("limit", strconv.Itoa(page))
		body, _, err := get(pq)
		if err != nil {
			return regionItems{}, err
		}
		var out struct {
			Items      []json.RawMessage `json:"items"`
			NextCursor *string           `json:"nextCursor"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return regionItems{}, fmt.Errorf("list: %w", err)
		}
		for _, raw := range out.Items {
			var d sandboxDTO
			if err := json.Unmarshal(raw, &d); err != nil {
				return regionItems{}, fmt.Errorf("list item: %w", err)
			}
			part.items = append(part.items, listItem{dto: d, raw: raw})
		}
		part.more = out.NextCursor != nil
		if !part.more || len(out.Items) == 0 {
			break
		}
	}
	return part, nil
}

// mergeList writes items [cursor, cursor+limit) of the merged order and
// nextCursor, null only when no region has more.
func mergeList(w http.ResponseWriter, in *http.Request, parts []regionItems) {
	f, _ := parseListFilter(in.URL.Query())
	var all []listItem
	more := false
	for _, p := range parts {
		all, more = append(all, p.items...), more || p.more
	}
	slices.SortFunc(all, func(a, b listItem) int { return f.compare(a.dto, b.dto) })
	from := min(f.cursor, len(all))
	to := min(from+f.limit, len(all))
	var next *string
	if to < len(all) || more {
		s := strconv.Itoa(f.cursor + f.limit)
		next = &s
	}
	items := make([]json.RawMessage, 0, to-from)
	for _, it := range all[from:to] {
		items = append(items, it.raw)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": next})
}
