package httpapi

import (
	"net/http"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// snapshotView is a snapshot or backup as the API shows it: host paths
// never appear.
type snapshotView struct {
	ID          string                 `json:"id"`
	Kind        sandbox.SnapshotKind   `json:"kind"`
	SandboxID   string                 `json:"sandbox_id"`
	Name        *string                `json:"name"`
	State       sandbox.SnapshotState  `json:"state"`
	Memory      bool                   `json:"memory"`
	SizeBytes   int64                  `json:"size_bytes"`
	Source      sandbox.SnapshotSource `json:"source"`
	HostID      string                 `json:"host_id,omitempty"`
	Bucket      string                 `json:"bucket,omitempty"`
	ManifestKey string                 `json:"manifest_key,omitempty"`
	Complete    *bool                  `json:"complete,omitempty"`
	Reason      string                 `json:"reason,omitempty"`
	Progress    *sandbox.Progress      `json:"progress,omitempty"`
	CreatedAt   string                 `json:"created_at"`
	UpdatedAt   string                 `json:"updated_at"`
}

func viewSnapshot(s sandbox.Snapshot) snapshotView {
	v := snapshotView{
		ID: s.ID, Kind: s.Kind, SandboxID: s.SandboxID, State: s.State, Memory: s.Memory, SizeBytes: s.SizeBytes,
		Source: s.Source, HostID: s.HostID, Bucket: s.Bucket, ManifestKey: s.ManifestKey, Reason: s.Reason,
		Progress: s.Progress, CreatedAt: sandbox.FormatTime(s.CreatedAt), UpdatedAt: sandbox.FormatTime(s.UpdatedAt),
	}
	if s.Name != "" {
		v.Name = &s.Name
	}
	if s.Kind == sandbox.KindBackup {
		// A backup is complete once its manifest and descriptor are written.
		c := s.State == sandbox.SnapshotReady
		v.Complete = &c
	}
	return v
}

func viewSnapshots(l []sandbox.Snapshot) map[string]any {
	return map[string]any{"rows": viewAll(l, viewSnapshot)}
}

type snapshotBody struct {
	Name   string `json:"name"`
	Memory *bool  `json:"memory"`
}

func (a *API) createSnapshot(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b snapshotBody
	if err := decodeJSON(r, &b, true); err != nil {
		return err
	}
	return respond(w, http.StatusCreated, viewSnapshot)(a.cp.Snapshot(r.Context(), p, r.PathValue("id"), controlplane.SnapshotRequest{Name: b.Name, Memory: b.Memory}))
}

func (a *API) listSnapshots(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respond(w, http.StatusOK, viewSnapshots)(a.cp.ListSnapshots(r.Context(), p, r.PathValue("id"), sandbox.KindSnapshot))
}

func (a *API) getSnapshot(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respond(w, http.StatusOK, viewSnapshot)(a.cp.GetSnapshot(r.Context(), p, r.PathValue("snap")))
}

func (a *API) deleteSnapshot(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return noContent(w, a.cp.DeleteSnapshot(r.Context(), p, r.PathValue("snap")))
}

type restoreBody struct {
	SnapshotID string `json:"snapshot_id"`
}

func (a *API) restoreSnapshot(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b restoreBody
	wait, timeout, err := makeParams(r, &b, false)
	if err != nil {
		return err
	}
	sb, err := a.cp.Restore(r.Context(), p, r.PathValue("id"), b.SnapshotID)
	if err != nil {
		return err
	}
	return a.waitAndWrite(w, r, p, sb, wait, timeout, http.StatusAccepted, http.StatusOK)
}

type forkBody struct {
	Count    *int              `json:"count"`
	Parent   *bool             `json:"parent"`
	Wait     bool              `json:"wait"`
	Metadata map[string]string `json:"metadata"`
}

// forkView is a fork's answer: the new sandboxes, and whether they start
// from the source's memory (and why not).
type forkView struct {
	SourceID     string        `json:"source_id"`
	Memory       bool          `json:"memory"`
	MemoryReason string        `json:"memory_reason,omitempty"`
	Sandboxes    []sandboxView `json:"sandboxes"`
	WaitTimedOut *bool         `json:"wait_timed_out,omitempty"`
}

func (a *API) fork(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b forkBody
	wait, timeout, err := makeParams(r, &b, true)
	if err != nil {
		return err
	}
	req := controlplane.ForkRequest{Count: 1, Metadata: b.Metadata}
	if b.Count != nil {
		req.Count = *b.Count
	}
	if b.Parent != nil {
		req.NoParent = !*b.Parent
	}
	if b.Wait {
		wait = sandbox.StateRunning
	}
	res, err := a.cp.Fork(r.Context(), p, r.PathValue("id"), req)
	if err != nil {
		return err
	}
	v := forkView{SourceID: res.SourceID, Memory: res.Memory, MemoryReason: res.MemoryReason, Sandboxes: []sandboxView{}}
	status := http.StatusCreated
	for _, sb := range res.Sandboxes {
		if wait != "" {
			got, reached, err := a.cp.WaitFor(r.Context(), p, sb.ID, wait, timeout)
			if err != nil {
				return err
			}
			if !reached && got.State != sandbox.StateFailed {
				t := true
				v.WaitTimedOut, status = &t, http.StatusAccepted
			}
			sb = got
		}
		v.Sandboxes = append(v.Sandboxes, a.view(sb))
	}
	writeJSON(w, status, v)
	return nil
}

type backupBody struct {
	Name string `json:"name"`
}

func (a *API) createBackup(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b backupBody
	if err := decodeJSON(r, &b, true); err != nil {
		return err
	}
	return respond(w, http.StatusAccepted, viewSnapshot)(a.cp.Backup(r.Context(), p, r.PathValue("id"), b.Name))
}

func (a *API) listBackups(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respond(w, http.StatusOK, viewSnapshots)(a.cp.ListSnapshots(r.Context(), p, r.PathValue("id"), sandbox.KindBackup))
}
