// Package region joins platforms that each have their own store into
// regions of one API (docs/ARCHITECTURE.md, "Regions"): a create naming
// another region is sent to a ptd of that region, a request for a sandbox
// this region's store does not know (on any surface, envd traffic
// included) is sent to the region that has it, and GET /v1/sandboxes and
// the compatible surfaces' sandbox lists (List) merge every region's
// rows. Within a region, internal/forward spreads requests over hosts;
// this package only ever speaks to a region's entry URL and knows nothing
// of its hosts.
package region

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/forward"
	"github.com/platinum-dev/platinum/internal/region/listmerge"
	"github.com/platinum-dev/platinum/internal/requestid"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Header marks a request one region sent to another and names the
// sender's region. Its receiver serves it within its own region: it is
// never sent to a third region, and a list carrying it is that region's
// rows only.
const Header = "Pt-Region-Forwarded-By"

// lookupPath is where a region asks a peer whether it has a sandbox for
// envd traffic (E2B's E2b-Sandbox-Id requests): GET lookupPath+<id>,
// marked with Header, with the sandbox's access token in X-Access-Token,
// the one credential such a request carries. The peer's router answers
// it from its store: 204 when it has the sandbox and the token is its,
// else 404.
const lookupPath = "/pt-region/sandboxes/"

// Peer is another region and the URL of any ptd of it.
type Peer struct {
	Name string
	URL  *url.URL
}

// Store is what the router reads of this region's store: whether it
// knows a sandbox at all.
type Store interface {
	// GetSandbox returns the record of id in any org (orgID empty), or
	// an error wrapping sandbox.ErrNotFound when the store has none.
	GetSandbox(ctx context.Context, orgID, id string) (sandbox.Sandbox, error)
}

// Router sends requests that belong to another region to it.
type Router struct {
	self   string
	peers  []Peer
	store  Store
	log    *slog.Logger
	client *http.Client
	proxy  *httputil.ReverseProxy
	// cacheFor is how long a sandbox found in a peer region is taken to
	// be there without asking again.
	cacheFor time.Duration

	// lists are the list routes answered with every region's rows.
	lists []List
	// creates are the create routes whose body may name a region.
	creates []Create

	mu    sync.Mutex
	found map[string]found // sandbox id → the peer region that has it
}

type found struct {
	peer Peer
	at   time.Time
}

// New returns the Router of region self, whose store is st.
func New(self string, peers []Peer, st Store, log *slog.Logger) *Router {
	r := &Router{self: self, peers: peers, store: st, log: log, cacheFor: 30 * time.Second,
		client: &http.Client{Timeout: 10 * time.Second}, found: map[string]found{}, lists: []List{nativeList()},
		creates: []Create{{Path: "/v1/sandboxes", Region: "region", Parent: "parent_id"}}}
	r.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(pr.In.Context().Value(peerKey{}).(Peer).URL)
			pr.SetXForwarded()
			pr.Out.Header.Set(Header, self)
		},
		// Streams and uploads pass through as they are written.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			p := req.Context().Value(peerKey{}).(Peer)
			r.log.WarnContext(req.Context(), "region: forward", "region", p.Name, "path", req.URL.Path, "err", err)
			writeUnavailable(w, req, p.Name, "region "+p.Name+" does not answer ("+err.Error()+"); retry in a few seconds")
		},
	}
	return r
}

type peerKey struct{}

// Wrap returns next behind the router: a create for a peer region, a
// request for a sandbox only a peer region has, and the sandbox lists
// (GET /v1/sandboxes and those AddLists added) go across regions;
// everything else, and anything another region sent, is served by next.
// Without peers it is next itself: one region costs nothing.
func (r *Router) Wrap(next http.Handler) http.Handler {
	if len(r.peers) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		l, isList := r.listFor(req)
		c := r.createFor(req)
		// envd traffic is for its sandbox whatever its path: a service in
		// the sandbox may serve GET /sandboxes too.
		envd := req.Header.Get("E2b-Sandbox-Id") != ""
		switch path := strings.TrimSuffix(req.URL.Path, "/"); {
		case req.Header.Get(Header) != "" && req.Method == http.MethodGet && strings.HasPrefix(path, lookupPath):
			r.answerLookup(w, req, strings.TrimPrefix(path, lookupPath))
		case req.Header.Get(Header) != "":
			next.ServeHTTP(w, req)
		case c != nil && !envd:
			r.create(w, req, next, c)
		case isList && !envd:
			r.list(w, req, next, l)
		default:
			p, ok, down := r.owner(req)
			switch {
			case ok:
				r.forward(w, req, p)
			case down != "":
				// Not here, and a region that may have it does not
				// answer: a 404 would say it exists nowhere.
				writeUnavailable(w, req, down, "sandbox "+forward.SandboxOf(req)+" is not in this region and region "+down+" does not answer; retry in a few seconds")
			default:
				next.ServeHTTP(w, req)
			}
		}
	})
}

func (r *Router) forward(w http.ResponseWriter, req *http.Request, p Peer) {
	r.proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), peerKey{}, p)))
}

func (r *Router) peer(name string) (Peer, bool) {
	i := slices.IndexFunc(r.peers, func(p Peer) bool { return p.Name == name })
	if i < 0 {
		return Peer{}, false
	}
	return r.peers[i], true
}

// Create is a create route whose JSON body may name the region to make
// the sandbox in: /v1's (field region, and parent_id, whose region a
// child is made in) and those AddCreates added.
type Create struct {
	// Path is the route's path (POST).
	Path string
	// Region is the body's field naming a region.
	Region string
	// Parent is the body's field naming a parent sandbox, if it has one.
	Parent string
}

// AddCreates makes the router send creates on cs naming a peer region
// there (besides /v1's). Call it before Wrap.
func (r *Router) AddCreates(cs ...Create) { r.creates = append(r.creates, cs...) }

// createFor is the create route req is for, if any.
func (r *Router) createFor(req *http.Request) *Create {
	path := strings.TrimSuffix(req.URL.Path, "/")
	i := slices.IndexFunc(r.creates, func(c Create) bool { return c.Path == path })
	if req.Method != http.MethodPost || i < 0 {
		return nil
	}
	return &r.creates[i]
}

// maxCreateBody bounds what is read of a create to find its region; a
// larger body is served here, where the API refuses it.
const maxCreateBody = 1 << 20

// create sends a create naming a peer region there whole (token and
// Idempotency-Key included), and so one naming no region whose
// parent_id only a peer region has: a child lives in its parent's
// region. One naming this region, none, or a region nobody knows is
// served here: the API makes it, or refuses an unknown region (400
// unknown_region) or parent (404) before anything is made.
func (r *Router) create(w http.ResponseWriter, req *http.Request, next http.Handler, c *Create) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxCreateBody+1))
	req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || len(body) > maxCreateBody {
		next.ServeHTTP(w, req)
		return
	}
	var fields map[string]json.RawMessage
	json.Unmarshal(body, &fields) // a body that does not parse is the API's to refuse
	var name, parent string
	json.Unmarshal(fields[c.Region], &name)
	if c.Parent != "" {
		json.Unmarshal(fields[c.Parent], &parent)
	}
	p, ok := r.peer(name)
	if name == "" && parent != "" {
		var down string
		if p, ok, down = r.ownerOf(req, parent); down != "" {
			writeUnavailable(w, req, down, "parent "+parent+" is not in this region and region "+down+" does not answer; retry in a few seconds")
			return
		}
	}
	if !ok || p.Name == r.self {
		next.ServeHTTP(w, req)
		return
	}
	req.ContentLength = int64(len(body))
	r.forward(w, req, p)
}

// owner is the peer region a request is for (ok): it names a sandbox
// this region's store does not know and a peer region has. Only a local
// miss asks the peers, so requests for this region's sandboxes cost one
// read of the store. When no peer has it but one did not answer, down
// names that region.
func (r *Router) owner(req *http.Request) (p Peer, ok bool, down string) {
	return r.ownerOf(req, forward.SandboxOf(req))
}

// ownerOf is owner for sandbox id, asked with req's credentials.
func (r *Router) ownerOf(req *http.Request, id string) (p Peer, ok bool, down string) {
	if id == "" {
		return Peer{}, false, ""
	}
	ctx := req.Context()
	if _, err := r.store.GetSandbox(ctx, "", id); !errors.Is(err, sandbox.ErrNotFound) {
		return Peer{}, false, ""
	}
	r.mu.Lock()
	f, ok := r.found[id]
	if ok && time.Since(f.at) > r.cacheFor {
		delete(r.found, id)
		ok = false
	}
	r.mu.Unlock()
	if ok {
		return f.peer, true, ""
	}
	for _, p := range r.peers {
		has, err := r.has(ctx, req, p, id)
		switch {
		case err != nil:
			r.log.WarnContext(ctx, "region: look up sandbox", "region", p.Name, "sandbox", id, "err", err)
			down = cmp.Or(down, p.Name)
		case has:
			r.mu.Lock()
			r.found[id] = found{peer: p, at: time.Now()}
			r.mu.Unlock()
			return p, true, ""
		}
	}
	return Peer{}, false, down
}

// has reports whether peer p has sandbox id, by reading its record with
// the caller's credentials (a bearer token is per region: the sandbox is
// found where the caller may see it); envd traffic, whose credential is
// the sandbox's access token, asks the peer's lookupPath with it. An
// error is a peer that did not answer.
func (r *Router) has(ctx context.Context, in *http.Request, p Peer, id string) (bool, error) {
	u := p.URL.JoinPath("/v1/sandboxes", id)
	u.RawQuery = "include_deleted=true"
	var extra http.Header
	switch key := in.Header.Get("X-Api-Key"); {
	case accessToken(in) != "":
		u, extra = p.URL.JoinPath(lookupPath, id), http.Header{"X-Access-Token": {accessToken(in)}}
	case key != "" && in.Header.Get("Authorization") == "":
		// E2B's API key is a Platinum token, which /v1 takes as a bearer.
		extra = http.Header{"Authorization": {"Bearer " + key}}
	}
	resp, err := r.peerGet(ctx, in, u, extra)
	if err != nil {
		return false, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return false, fmt.Errorf("region %s answered %s", p.Name, resp.Status)
	}
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNoContent, nil
}

// accessToken is the sandbox access token of envd traffic (a request
// with E2b-Sandbox-Id): X-Access-Token, or E2B's E2b-Traffic-Access-Token
// for a sandbox's other ports. Empty for any other request, and for envd
// requests that carry none (a health probe, a pre-signed file URL).
func accessToken(req *http.Request) string {
	if req.Header.Get("E2b-Sandbox-Id") == "" {
		return ""
	}
	return cmp.Or(req.Header.Get("X-Access-Token"), req.Header.Get("E2b-Traffic-Access-Token"))
}

// answerLookup answers a peer's lookupPath question for sandbox id: 204
// when this region's store has it and X-Access-Token is its access token,
// 404 when it has no such sandbox or the token is not its (a wrong token
// learns nothing more than a missing sandbox).
func (r *Router) answerLookup(w http.ResponseWriter, req *http.Request, id string) {
	sb, err := r.store.GetSandbox(req.Context(), "", id)
	tok := req.Header.Get("X-Access-Token")
	switch {
	case err != nil && !errors.Is(err, sandbox.ErrNotFound):
		r.log.ErrorContext(req.Context(), "region: answer look-up", "sandbox", id, "err", err)
		w.WriteHeader(http.StatusInternalServerError)
	case err != nil || tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(sb.AgentToken)) != 1:
		w.WriteHeader(http.StatusNotFound)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// peerGet asks a peer for u as in's caller: with in's credentials (and
// the extra headers) and request id, and marked with Header as this
// region's own question.
func (r *Router) peerGet(ctx context.Context, in *http.Request, u *url.URL, extra http.Header) (*http.Response, error) {
	out, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	maps.Copy(out.Header, extra)
	for _, h := range []string{"Authorization", "X-Api-Key"} {
		if v := in.Header.Get(h); v != "" {
			out.Header.Set(h, v)
		}
	}
	if id := requestid.From(in.Context()); id != "" {
		out.Header.Set(requestid.Header, id)
	}
	out.Header.Set(Header, r.self)
	return r.client.Do(out)
}

// pageMax is the largest page a region serves (the API's limit bound).
const pageMax = 200

// nativeList is GET /v1/sandboxes: each region (this one in-process) is
// asked for its own first offset+limit rows, and the merge's
// [offset, offset+limit) is the page. total, when asked, is the sum of
// the regions' totals, each from one snapshot of its own store.
func nativeList() List {
	type part struct {
		rows  []listmerge.Row
		total int
	}
	return NewList(http.MethodGet, "/v1/sandboxes",
		func(in *http.Request) bool {
			_, _, ok := window(in.URL.Query())
			_, err := strconv.ParseBool(cmp.Or(in.URL.Query().Get("paginated"), "false"))
			return ok && err == nil
		},
		func(in *http.Request, get Get) (part, error) {
			q := in.URL.Query()
			offset, limit, _ := window(q)
			paginated, _ := strconv.ParseBool(cmp.Or(q.Get("paginated"), "false"))
			rows, total, err := regionRows(q, get, offset+limit, paginated)
			return part{rows, total}, err
		},
		func(w http.ResponseWriter, in *http.Request, parts []part) {
			q := in.URL.Query()
			offset, limit, _ := window(q)
			paginated, _ := strconv.ParseBool(cmp.Or(q.Get("paginated"), "false"))
			lists, total := make([][]listmerge.Row, len(parts)), 0
			for i, p := range parts {
				lists[i], total = p.rows, total+p.total
			}
			rows := listmerge.Merge(lists, offset, limit)
			out := struct {
				Rows  []json.RawMessage `json:"rows"`
				Total *int              `json:"total,omitempty"`
			}{Rows: make([]json.RawMessage, len(rows))}
			for i, row := range rows {
				out.Rows[i] = row.Raw
			}
			if paginated {
				out.Total = &total
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(out)
		})
}

// window reads offset and limit as the API does (limit 50 by default, at
// most pageMax); ok is false for a value the API refuses.
func window(q url.Values) (offset, limit int, ok bool) {
	offset, limit = 0, 50
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, 0, false
		}
		offset = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > pageMax {
			return 0, 0, false
		}
		limit = n
	}
	return offset, limit, true
}

// regionRows reads one region's first n rows of the list q asks for, a
// page of at most pageMax at a time, and its total (from its first page)
// when paginated.
func regionRows(q url.Values, get Get, n int, paginated bool) ([]listmerge.Row, int, error) {
	var rows []listmerge.Row
	total := 0
	for first := true; len(rows) < n; first = false {
		page := min(pageMax, n-len(rows))
		pq := maps.Clone(q) // Set replaces values, never edits them
		pq.Set("offset", strconv.Itoa(len(rows)))
		pq.Set("limit", strconv.Itoa(page))
		pq.Set("paginated", strconv.FormatBool(paginated && first))
		b, _, err := get(pq)
		if err != nil {
			return nil, 0, err
		}
		var body struct {
			Rows  []json.RawMessage `json:"rows"`
			Total int               `json:"total"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			return nil, 0, err
		}
		if first {
			total = body.Total
		}
		for _, raw := range body.Rows {
			row, err := listmerge.Parse(raw)
			if err != nil {
				return nil, 0, err
			}
			rows = append(rows, row)
		}
		if len(body.Rows) < page {
			break
		}
	}
	return rows, total, nil
}

// writeUnavailable answers 503 region_unavailable naming the region, in
// /v1's error shape, with Retry-After.
func writeUnavailable(w http.ResponseWriter, req *http.Request, region, msg string) {
	forward.WriteError(w, req, "region_unavailable", msg, map[string]any{"region": region})
}
