package region

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// List is a list route answered with every region's rows: the native
// GET /v1/sandboxes, and each compatible surface's sandbox list, merged by
// that surface's own order and paging (docs/ARCHITECTURE.md, "Regions").
// Make one with NewList.
type List struct {
	method, path string
	valid        func(in *http.Request) bool
	part         func(in *http.Request, get Get) (any, error)
	merge        func(w http.ResponseWriter, in *http.Request, parts []any)
}

// Get asks one region for its own answer to the list request, with query
// q instead of the caller's: this region in-process, a peer over HTTP
// with the caller's credentials, both marked with Header so each answers
// with its own rows only. A region that answers other than 200 is a
// *Refused error; one that does not answer is any other error.
type Get func(q url.Values) (body []byte, header http.Header, err error)

// Refused is a region's answer other than 200 to a list page; the list
// passes it on as it came, with Pt-Region naming the region.
type Refused struct {
	Status int
	Header http.Header
	Body   []byte
}

func (e *Refused) Error() string { return fmt.Sprintf("answered %d", e.Status) }

// NewList returns the list route method path (a trailing slash ignored).
// valid reports whether the request's query is one the surface accepts
// (nil: every one); one it refuses is served by this region alone, whose
// handler answers its 4xx, so bad input never reaches a peer. part reads
// what one region gives the answer to in, calling get as often as it
// needs (one page at a time, say); all regions' parts are read at once.
// merge writes the answer from every region's part, this region's first.
// A region that does not answer makes the list 503 region_unavailable
// naming it, not a partial list: a page without its rows would shift
// every later page and drop or repeat rows.
func NewList[P any](method, path string, valid func(in *http.Request) bool,
	part func(in *http.Request, get Get) (P, error), merge func(w http.ResponseWriter, in *http.Request, parts []P)) List {
	return List{method: method, path: path, valid: valid,
		part: func(in *http.Request, get Get) (any, error) { return part(in, get) },
		merge: func(w http.ResponseWriter, in *http.Request, parts []any) {
			ps := make([]P, len(parts))
			for i, p := range parts {
				ps[i] = p.(P)
			}
			merge(w, in, ps)
		}}
}

// AddLists makes the router answer ls across regions too (besides
// GET /v1/sandboxes). Call it before Wrap.
func (r *Router) AddLists(ls ...List) { r.lists = append(r.lists, ls...) }

// listFor is the list route req is for, if any.
func (r *Router) listFor(req *http.Request) (List, bool) {
	path := strings.TrimSuffix(req.URL.Path, "/")
	for _, l := range r.lists {
		if l.method == req.Method && l.path == path {
			return l, true
		}
	}
	return List{}, false
}

// list answers req, a request for list route l, from every region.
func (r *Router) list(w http.ResponseWriter, req *http.Request, next http.Handler, l List) {
	if l.valid != nil && !l.valid(req) {
		next.ServeHTTP(w, req) // this region refuses the bad value
		return
	}
	regions := append([]string{r.self}, make([]string, len(r.peers))...)
	for i, p := range r.peers {
		regions[i+1] = p.Name
	}
	parts, errs := make([]any, len(regions)), make([]error, len(regions))
	var wg sync.WaitGroup
	for i := range regions {
		wg.Go(func() {
			parts[i], errs[i] = l.part(req, func(q url.Values) ([]byte, http.Header, error) {
				return r.get(req, next, i, l.path, q)
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		var refused *Refused
		switch {
		case errors.As(err, &refused):
			refused.write(w, regions[i])
			return
		case err != nil:
			r.log.WarnContext(req.Context(), "region: list", "region", regions[i], "path", req.URL.Path, "err", err)
			writeUnavailable(w, req, regions[i], "region "+regions[i]+" does not answer the list ("+err.Error()+"); retry in a few seconds")
			return
		}
	}
	l.merge(w, req, parts)
}

// get asks region i (0: this one, in-process through next, as in came;
// a peer at path) for the list in asks for, with query q.
func (r *Router) get(in *http.Request, next http.Handler, i int, path string, q url.Values) ([]byte, http.Header, error) {
	var a Refused
	if i == 0 {
		req := in.Clone(in.Context())
		req.URL.RawQuery = q.Encode()
		req.RequestURI = ""
		req.Header.Set(Header, r.self)
		rec := &recorder{Refused: Refused{Status: http.StatusOK, Header: http.Header{}}}
		next.ServeHTTP(rec, req)
		a = rec.Refused
	} else {
		u := r.peers[i-1].URL.JoinPath(path)
		u.RawQuery = q.Encode()
		resp, err := r.peerGet(in.Context(), in, u, nil)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, nil, err
		}
		a = Refused{Status: resp.StatusCode, Header: resp.Header, Body: body}
	}
	if a.Status != http.StatusOK {
		return nil, nil, &a
	}
	return a.Body, a.Header, nil
}

// recorder keeps this region's in-process answer to a list page.
type recorder struct {
	Refused
	wrote bool
}

func (r *recorder) Header() http.Header { return r.Refused.Header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.Status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	r.Body = append(r.Body, b...)
	return len(b), nil
}

func (e *Refused) write(w http.ResponseWriter, region string) {
	for _, k := range []string{"Content-Type", "Retry-After"} {
		if v := e.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.Header().Set("Pt-Region", region)
	w.WriteHeader(e.Status)
	w.Write(e.Body)
}
