package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// E2B's snapshots are templates made from a running sandbox: createSnapshot
// answers an ID that Sandbox.create accepts as templateID, listSnapshots
// pages them, and deleteSnapshot deletes "the template". They map onto
// Platinum's snapshots (snap_…, memory where the runtime class can) and
// clones (from_snapshot); fork maps onto Platinum's fork.

// snapshotView is E2B's SnapshotInfo.
type snapshotView struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func newSnapshotView(s sandbox.Snapshot) snapshotView {
	v := snapshotView{SnapshotID: s.ID, Names: []string{}}
	if s.Name != "" {
		v.Names = append(v.Names, s.Name)
	}
	return v
}

// createSnapshot is POST /sandboxes/:id/snapshots {name?}: 201 once the
// snapshot is ready; the sandbox keeps running.
func (h *Handler) createSnapshot(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(r, &req, true); err != nil {
		return err
	}
	sb, _, err := h.visible(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	snap, err := h.cp.Snapshot(r.Context(), p, sb.ID, controlplane.SnapshotRequest{Name: req.Name})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, newSnapshotView(snap))
	return nil
}

// listSnapshots is GET /snapshots?sandboxID=&name=&limit=&nextToken=,
// newest first; the next page's token (the last ID of this one) is in
// X-Next-Token.
func (h *Handler) listSnapshots(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	q := r.URL.Query()
	sq, err := parseSnapshotQuery(q)
	if err != nil {
		return err
	}
	all, err := h.cp.ListSnapshots(r.Context(), p, q.Get("sandboxID"), sandbox.KindSnapshot)
	if err != nil {
		return err
	}
	writeSnapshots(w, all, sq)
	return nil
}

// snapshotQuery is a snapshot list's page: at most limit snapshots named
// name (any when empty) whose IDs sort before after (all when empty).
type snapshotQuery struct {
	limit       int
	after, name string
}

// parseSnapshotQuery reads GET /snapshots' query. A nextToken is a
// snapshot ID: the page goes on after it in ID order (a ULID's, so
// newest first), whether or not this region holds it, so one token
// pages every region's list (RegionLists).
func parseSnapshotQuery(q url.Values) (snapshotQuery, error) {
	sq := snapshotQuery{limit: 100, after: q.Get("nextToken"), name: q.Get("name")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return sq, badRequest("limit must be between 1 and 1000")
		}
		sq.limit = n
	}
	if sq.after != "" && !sandbox.ValidID(sandbox.PrefixSnapshot, sq.after) {
		return sq, badRequest("nextToken is not one this server issued")
	}
	return sq, nil
}

// writeSnapshots writes the page sq asks for of all, the ready ones in
// ID order, newest first, with X-Next-Token when more follow.
func writeSnapshots(w http.ResponseWriter, all []sandbox.Snapshot, sq snapshotQuery) {
	slices.SortStableFunc(all, func(a, b sandbox.Snapshot) int { return strings.Compare(b.ID, a.ID) })
	out := []snapshotView{}
	for _, s := range all {
		if sq.after != "" && s.ID >= sq.after || s.State != sandbox.SnapshotReady || sq.name != "" && s.Name != sq.name {
			continue
		}
		if len(out) == sq.limit {
			w.Header().Set("X-Next-Token", out[len(out)-1].SnapshotID)
			break
		}
		out = append(out, newSnapshotView(s))
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteSnapshot is DELETE /templates/:id, which the SDK's deleteSnapshot
// calls: 204 for a snapshot, 404 (the SDK returns false) for anything
// else. Templates themselves are not deleted through the E2B surface.
func (h *Handler) deleteSnapshot(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	id := r.PathValue("id")
	if !strings.HasPrefix(id, sandbox.PrefixSnapshot) {
		return &apiError{Status: http.StatusNotFound, Msg: "snapshot '" + id + "' not found"}
	}
	if err := h.cp.DeleteSnapshot(r.Context(), p, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// snapshotTemplate returns the snapshot a create's templateID names: a
// snap_… ID, or the name of one of the org's snapshots when no template
// has that name. "" means templateID is a template.
func (h *Handler) snapshotTemplate(ctx context.Context, p controlplane.Principal, templateID string) (string, error) {
	if strings.HasPrefix(templateID, sandbox.PrefixSnapshot) {
		if _, err := h.cp.GetSnapshot(ctx, p, templateID); err != nil {
			if errors.Is(err, sandbox.ErrNotFound) {
				return "", &apiError{Status: http.StatusNotFound, Msg: fmt.Sprintf("template '%s' not found", templateID)}
			}
			return "", err
		}
		return templateID, nil
	}
	if ts, err := h.cp.ListTemplates(ctx); err == nil {
		for _, t := range ts {
			if t.Slug == templateSlug(templateID) {
				return "", nil
			}
		}
	}
	snaps, err := h.cp.ListSnapshots(ctx, p, "", sandbox.KindSnapshot)
	if err != nil {
		return "", err
	}
	for _, s := range snaps { // newest first: a name reused names the newest
		if s.Name == templateID && s.State == sandbox.SnapshotReady {
			return s.ID, nil
		}
	}
	return "", nil
}

// forkResult is one entry of POST /sandboxes/:id/fork's answer: a running
// sandbox or why this copy failed.
type forkResult struct {
	Sandbox *sandboxView `json:"sandbox,omitempty"`
	Error   *errorBody   `json:"error,omitempty"`
}

// fork is POST /sandboxes/:id/fork {timeout?, count?}: 201 with one entry
// per copy once each runs (or failed and was deleted). E2B's forks are
// independent sandboxes, so they are not children of the source (a
// parent could not be killed while they live).
func (h *Handler) fork(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req struct {
		Timeout *int64 `json:"timeout"`
		Count   *int   `json:"count"`
	}
	if err := decodeJSON(r, &req, true); err != nil {
		return err
	}
	ttl, err := timeout(req.Timeout, defaultTimeoutV2)
	if err != nil {
		return err
	}
	if ttl == 0 {
		return badRequest("timeout must be at least 1 second")
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	ctx := r.Context()
	src, _, err := h.visible(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := h.cp.Fork(ctx, p, src.ID, controlplane.ForkRequest{Count: count, NoParent: true})
	if err != nil {
		return err
	}
	out := make([]forkResult, count)
	var wg sync.WaitGroup
	for i, sb := range res.Sandboxes {
		wg.Go(func() {
			sb, err := h.ready(ctx, p, sb, ttl, sandbox.ExpireDelete, start)
			if err != nil {
				_, body, _ := errorStatus(err)
				out[i].Error = &body
				return
			}
			v := h.sandboxView(sb, false)
			out[i].Sandbox = &v
		})
	}
	wg.Wait()
	for i := len(res.Sandboxes); i < count; i++ {
		out[i].Error = &errorBody{Code: http.StatusInternalServerError, Message: "fork: " + res.MemoryReason}
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// updateNetwork is PUT /sandboxes/:id/network: it replaces the sandbox's
// egress policy (allow_internet_access, allowOut, denyOut) and applies it
// at once on a running sandbox. 204.
func (h *Handler) updateNetwork(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var req struct {
		AllowInternetAccess *bool           `json:"allow_internet_access"`
		AllowOut            []string        `json:"allowOut"`
		DenyOut             []string        `json:"denyOut"`
		EgressProxy         json.RawMessage `json:"egressProxy"`
		Rules               json.RawMessage `json:"rules"`
	}
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if !isNull(req.EgressProxy) || !isNull(req.Rules) {
		return badRequest("network egress rules and egressProxy are not supported by Platinum's E2B surface yet")
	}
	n := newSandbox{AllowInternetAccess: req.AllowInternetAccess, Network: &networkConfig{AllowOut: req.AllowOut, DenyOut: req.DenyOut}}
	return h.changeVisible(w, r, p, func(ctx context.Context, sb sandbox.Sandbox) error {
		_, err := h.cp.SetNetwork(ctx, p, sb.ID, n.networkPolicy())
		return err
	})
}
