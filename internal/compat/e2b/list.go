package e2b

import (
	"cmp"
	"encoding/base64"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// listQuery is GET /v2/sandboxes's filters and page.
type listQuery struct {
	states       map[string]bool // E2B states wanted
	metadata     map[string]string
	template     string // Platinum slug; "" any
	startedAfter time.Time
	asc          bool
	limit        int
	after        *listCursor // exclusive
}

// listCursor is a position in the (startedAt, id) order; nextToken is its
// opaque encoding, stable while sandboxes come and go.
type listCursor struct {
	at time.Time
	id string
}

func (c listCursor) token() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixNano(), 10) + "." + c.id))
}

func parseCursor(tok string) (*listCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, badRequest("nextToken is not one this server issued")
	}
	ns, id, ok := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || !sandbox.ValidID(sandbox.PrefixSandbox, id) {
		return nil, badRequest("nextToken is not one this server issued")
	}
	return &listCursor{at: time.Unix(0, n).UTC(), id: id}, nil
}

const (
	defaultListLimit = 100
	maxListLimit     = 100
)

// parseListQuery reads E2B's list parameters: state is comma-separated
// (form style, explode=false); metadata is itself a query string whose
// keys and values the SDK URI-encoded once more.
func parseListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{states: map[string]bool{stateRunning: true, statePaused: true}, limit: defaultListLimit}
	if s := q.Get("state"); s != "" {
		lq.states = map[string]bool{}
		for _, st := range splitCSV(s) {
			if st != stateRunning && st != statePaused {
				return lq, badRequest("state %q is not running or paused", st)
			}
			lq.states[st] = true
		}
	}
	if m := q.Get("metadata"); m != "" {
		md, err := parseMetadataFilter(m)
		if err != nil {
			return lq, err
		}
		lq.metadata = md
	}
	if t := q.Get("template"); t != "" {
		lq.template = templateSlug(t)
	}
	if s := q.Get("startedAfter"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return lq, badRequest("startedAfter must be an RFC 3339 time")
		}
		lq.startedAfter = t
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		lq.asc = true
	default:
		return lq, badRequest("order must be asc or desc")
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxListLimit {
			return lq, badRequest("limit must be between 1 and %d", maxListLimit)
		}
		lq.limit = n
	}
	if s := q.Get("nextToken"); s != "" {
		c, err := parseCursor(s)
		if err != nil {
			return lq, err
		}
		lq.after = c
	}
	return lq, nil
}

// parseMetadataFilter decodes "k1=v1&k2=v2" whose keys and values may be
// percent-encoded once more (the SDK runs encodeURIComponent on each).
func parseMetadataFilter(s string) (map[string]string, error) {
	vals, err := url.ParseQuery(s)
	if err != nil {
		return nil, badRequest("metadata must be a query string like key1=value1&key2=value2")
	}
	out := map[string]string{}
	for k, vs := range vals {
		dk, err1 := url.PathUnescape(k)
		dv, err2 := url.PathUnescape(vs[len(vs)-1])
		if err1 != nil || err2 != nil {
			return nil, badRequest("metadata filter %q is not percent-encoded correctly", k)
		}
		out[dk] = dv
	}
	return out, nil
}

// startedAt is when the sandbox last started: E2B's startedAt, and the
// list order.
func startedAt(sb sandbox.Sandbox) time.Time {
	if sb.LastStart != nil && !sb.LastStart.At.IsZero() {
		return sb.LastStart.At.UTC()
	}
	return sb.CreatedAt.UTC()
}

// match reports whether sb passes the filters, with its E2B state.
func (lq listQuery) match(sb sandbox.Sandbox) (string, bool) {
	state, ok := e2bState(sb.State)
	if !ok || !lq.states[state] {
		return "", false
	}
	if lq.template != "" && sb.Template != lq.template {
		return "", false
	}
	if !lq.startedAfter.IsZero() && !startedAt(sb).After(lq.startedAfter) {
		return "", false
	}
	for k, v := range lq.metadata {
		if got, ok := sb.Metadata[k]; !ok || got != v {
			return "", false
		}
	}
	return state, true
}

// compareCursor orders positions by startedAt, then sandbox id: the list's
// ascending order (one region's, and the merge of several).
func compareCursor(a, b listCursor) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// page filters, orders and cuts one page, and returns the token of the
// next page ("" on the last).
func (h *Handler) page(all []sandbox.Sandbox, lq listQuery) ([]detailView, string) {
	type item struct {
		sb    sandbox.Sandbox
		state string
		key   listCursor
	}
	var items []item
	for _, sb := range all {
		if state, ok := lq.match(sb); ok {
			items = append(items, item{sb, state, listCursor{startedAt(sb), sb.ID}})
		}
	}
	slices.SortFunc(items, func(a, b item) int {
		if lq.asc {
			return compareCursor(a.key, b.key)
		}
		return compareCursor(b.key, a.key)
	})
	if lq.after != nil {
		i := 0
		for i < len(items) {
			c := compareCursor(items[i].key, *lq.after)
			if (lq.asc && c > 0) || (!lq.asc && c < 0) {
				break
			}
			i++
		}
		items = items[i:]
	}
	next := ""
	if len(items) > lq.limit {
		items = items[:lq.limit]
		next = items[len(items)-1].key.token()
	}
	out := make([]detailView, 0, len(items))
	for _, it := range items {
		out = append(out, h.detailView(it.sb, it.state, false))
	}
	return out, next
}

// listV2 is GET /v2/sandboxes: running and paused sandboxes (or the
// states asked for), filtered by metadata and template, newest start
// first, paged with nextToken / X-Next-Token.
func (h *Handler) listV2(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return h.list(w, r, p, true)
}

// listV1 is the deprecated GET /sandboxes: running sandboxes (unless
// state says otherwise), filtered by metadata, unpaged.
func (h *Handler) listV1(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return h.list(w, r, p, false)
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, p controlplane.Principal, v2 bool) error {
	lq, err := listQueryOf(r.URL.Query(), v2)
	if err != nil {
		return err
	}
	all, err := h.cp.ListLive(r.Context(), p)
	if err != nil {
		return err
	}
	h.writeList(w, all, lq)
	return nil
}

// listQueryOf reads the query of GET /v2/sandboxes (v2) or of the
// unpaged GET /sandboxes, which lists running sandboxes unless state says
// otherwise.
func listQueryOf(q url.Values, v2 bool) (listQuery, error) {
	if v2 {
		return parseListQuery(q)
	}
	if q.Get("state") == "" {
		q = maps.Clone(q)
		q.Set("state", stateRunning)
	}
	lq, err := parseListQuery(q)
	lq.limit, lq.after = int(^uint(0)>>1), nil
	return lq, err
}

// writeList answers a list with the page lq asks for of all, and the
// next page's token in X-Next-Token.
func (h *Handler) writeList(w http.ResponseWriter, all []sandbox.Sandbox, lq listQuery) {
	items, next := h.page(all, lq)
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, items)
}
