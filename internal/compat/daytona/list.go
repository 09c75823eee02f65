package daytona

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
)

// listFilter is GET /sandbox's query: every filter the 0.218 SDK sends
// (daytona.list) applies to the whole list before it is paged, so a page
// never comes back short while later ones still match.
type listFilter struct {
	labels                         map[string]string
	idPrefix, namePrefix           string
	states, snapshots              []string
	regions, classes               []string
	minCPU, maxCPU, minMem, maxMem *float64
	minDisk, maxDisk, minGPU       *float64
	maxGPU                         *float64
	isPublic, isRecoverable        *bool
	includeDestroyed               bool
	createdAfter, createdBefore    *time.Time
	eventAfter, eventBefore        *time.Time
	destroyAfter, destroyBefore    *time.Time
	sort, order                    string
	cursor, limit                  int
}

// parseListFilter reads the query; a malformed value is 400 (never
// ignored).
func parseListFilter(q url.Values) (listFilter, error) {
	f := listFilter{limit: 100, sort: "createdAt", order: "desc"}
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &f.labels); err != nil {
			return f, badRequest("labels must be a JSON object of strings: %v", err)
		}
	}
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			return f, badRequest("cursor %q is not one this server gave", c)
		}
		f.cursor = n
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 200 {
			return f, badRequest("limit must be between 1 and 200")
		}
		f.limit = n
	}
	f.idPrefix, f.namePrefix = strings.ToLower(q.Get("id")), strings.ToLower(q.Get("name"))
	f.states, f.snapshots, f.regions, f.classes = q["states"], q["snapshots"], q["regionIds"], q["sandboxClasses"]
	for _, n := range []struct {
		name string
		dst  **float64
	}{{"minCpu", &f.minCPU}, {"maxCpu", &f.maxCPU}, {"minMemoryGiB", &f.minMem}, {"maxMemoryGiB", &f.maxMem},
		{"minDiskGiB", &f.minDisk}, {"maxDiskGiB", &f.maxDisk}, {"minGpu", &f.minGPU}, {"maxGpu", &f.maxGPU}} {
		if v := q.Get(n.name); v != "" {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return f, badRequest("%s must be a number", n.name)
			}
			*n.dst = &x
		}
	}
	for _, b := range []struct {
		name string
		dst  **bool
	}{{"isPublic", &f.isPublic}, {"isRecoverable", &f.isRecoverable}} {
		if v := q.Get(b.name); v != "" {
			x, err := strconv.ParseBool(v)
			if err != nil {
				return f, badRequest("%s must be true or false", b.name)
			}
			*b.dst = &x
		}
	}
	if v := q.Get("includeErroredDeleted"); v != "" {
		x, err := strconv.ParseBool(v)
		if err != nil {
			return f, badRequest("includeErroredDeleted must be true or false")
		}
		f.includeDestroyed = x
	}
	if v := q.Get("includeWarm"); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return f, badRequest("includeWarm must be true or false")
		}
		// Warm pool sandboxes belong to the server until claimed: an
		// org's list never has any to include.
	}
	for _, t := range []struct {
		name string
		dst  **time.Time
	}{{"createdAtAfter", &f.createdAfter}, {"createdAtBefore", &f.createdBefore},
		{"lastEventAfter", &f.eventAfter}, {"lastEventBefore", &f.eventBefore},
		{"autoDestroyAtAfter", &f.destroyAfter}, {"autoDestroyAtBefore", &f.destroyBefore}} {
		if v := q.Get(t.name); v != "" {
			x, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, badRequest("%s must be an ISO 8601 time", t.name)
			}
			*t.dst = &x
		}
	}
	if v := q.Get("sort"); v != "" {
		switch v {
		case "name", "cpu", "memoryGib", "diskGib", "lastActivityAt", "createdAt":
			f.sort = v
		default:
			return f, badRequest("sort must be name, cpu, memoryGib, diskGib, lastActivityAt or createdAt")
		}
	}
	if v := q.Get("order"); v != "" {
		if v != "asc" && v != "desc" {
			return f, badRequest("order must be asc or desc")
		}
		f.order = v
	}
	return f, nil
}

func inRange(v float64, lo, hi *float64) bool {
	return (lo == nil || v >= *lo) && (hi == nil || v <= *hi)
}

func inTime(t *time.Time, after, before *time.Time) bool {
	if after == nil && before == nil {
		return true
	}
	return t != nil && (after == nil || t.After(*after)) && (before == nil || t.Before(*before))
}

func parseISO(s string) *time.Time {
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	return &t
}

// lastEvent is when anything last happened to the sandbox: its last
// update or activity, whichever is later.
func lastEvent(d sandboxDTO) *time.Time {
	t := parseISO(d.UpdatedAt)
	if a := parseISO(d.LastActivityAt); a != nil && (t == nil || a.After(*t)) {
		t = a
	}
	return t
}

// match reports whether the sandbox d passes every filter but labels
// (which the store applies).
func (f listFilter) match(d sandboxDTO) bool {
	switch {
	case f.idPrefix != "" && !strings.HasPrefix(strings.ToLower(d.ID), f.idPrefix),
		f.namePrefix != "" && !strings.HasPrefix(strings.ToLower(d.Name), f.namePrefix),
		len(f.states) > 0 && !slices.Contains(f.states, d.State),
		len(f.snapshots) > 0 && !slices.Contains(f.snapshots, d.Snapshot),
		len(f.regions) > 0 && !slices.Contains(f.regions, d.Target),
		len(f.classes) > 0 && !slices.Contains(f.classes, d.SandboxClass),
		!inRange(float64(d.CPU), f.minCPU, f.maxCPU), !inRange(float64(d.Memory), f.minMem, f.maxMem),
		!inRange(float64(d.Disk), f.minDisk, f.maxDisk), !inRange(float64(d.GPU), f.minGPU, f.maxGPU),
		f.isPublic != nil && d.Public != *f.isPublic,
		f.isRecoverable != nil && d.Recoverable != *f.isRecoverable,
		!inTime(parseISO(d.CreatedAt), f.createdAfter, f.createdBefore),
		!inTime(lastEvent(d), f.eventAfter, f.eventBefore):
		return false
	}
	var destroy *time.Time
	if d.AutoDestroyAt != nil {
		destroy = parseISO(*d.AutoDestroyAt)
	}
	return inTime(destroy, f.destroyAfter, f.destroyBefore)
}

// compare orders by the sort field, then by ID so pages are stable.
func (f listFilter) compare(a, b sandboxDTO) int {
	var c int
	switch f.sort {
	case "name":
		c = cmp.Compare(a.Name, b.Name)
	case "cpu":
		c = cmp.Compare(a.CPU, b.CPU)
	case "memoryGib":
		c = cmp.Compare(a.Memory, b.Memory)
	case "diskGib":
		c = cmp.Compare(a.Disk, b.Disk)
	case "lastActivityAt":
		c = cmp.Compare(a.LastActivityAt, b.LastActivityAt)
	default:
		c = cmp.Compare(a.CreatedAt, b.CreatedAt)
	}
	if c == 0 {
		c = cmp.Compare(a.ID, b.ID)
	}
	if f.order == "desc" {
		return -c
	}
	return c
}

// list is GET /sandbox (daytona.list): {items, nextCursor}. The cursor is
// an offset into the filtered, sorted list; nextCursor is null on the last
// page. Errored sandboxes are listed; destroyed ones only with
// includeErroredDeleted.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	f, err := parseListFilter(r.URL.Query())
	if err != nil {
		return err
	}
	lr := controlplane.ListRequest{Limit: 200, Metadata: f.labels, Include: []string{"failed"}}
	if f.includeDestroyed {
		lr.Include = append(lr.Include, "destroyed")
	}
	all := []sandboxDTO{}
	for {
		page, total, err := h.cp.List(r.Context(), p, lr)
		if err != nil {
			return err
		}
		for _, sb := range page {
			if d := h.view(r, sb); f.match(d) {
				all = append(all, d)
			}
		}
		lr.Offset += len(page)
		if len(page) == 0 || lr.Offset >= total {
			break
		}
	}
	writePage(w, f, all)
	return nil
}

// writePage answers the page f asks for of all, the sandboxes that match
// it: {items, nextCursor}.
func writePage(w http.ResponseWriter, f listFilter, all []sandboxDTO) {
	slices.SortFunc(all, f.compare)
	from := min(f.cursor, len(all))
	to := min(from+f.limit, len(all))
	var next *string
	if to < len(all) {
		s := strconv.Itoa(to)
		next = &s
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": all[from:to], "nextCursor": next})
}
