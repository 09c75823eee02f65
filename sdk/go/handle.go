package platinum

import (
	"context"
	"fmt"
	"io"
	"time"
)

// SandboxHandle is one sandbox, for further calls without repeating its
// id: Connect returns it. It holds no state beyond the id, so it never
// goes stale; Get reads the current record. A handle is safe for
// concurrent use, and each method behaves (and fails) exactly like the
// SandboxesService method of the same name.
type SandboxHandle struct {
	s  *SandboxesService
	id string
}

// Connect checks that the sandbox exists and returns a handle for further
// calls to it (read the record with Get). It does not start a stopped
// sandbox: call Start on the handle. An unknown or deleted sandbox gives
// an APIError with code not_found.
func (s *SandboxesService) Connect(ctx context.Context, id string) (*SandboxHandle, error) {
	if _, err := s.get(ctx, id, false); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return &SandboxHandle{s: s, id: id}, nil
}

// ID returns the sandbox's id.
func (h *SandboxHandle) ID() string { return h.id }

// Get returns the sandbox's current record.
func (h *SandboxHandle) Get(ctx context.Context) (*Sandbox, error) { return h.s.Get(ctx, h.id) }

// Exec runs a command in the sandbox and returns its whole output.
func (h *SandboxHandle) Exec(ctx context.Context, req ExecRequest) (*ExecResult, error) {
	return h.s.Exec(ctx, h.id, req)
}

// ExecStream runs a command in the sandbox, writing its output as it comes.
func (h *SandboxHandle) ExecStream(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (*ExecResult, error) {
	return h.s.ExecStream(ctx, h.id, req, stdout, stderr)
}

// Upload writes everything r yields to path in the sandbox.
func (h *SandboxHandle) Upload(ctx context.Context, path string, r io.Reader) error {
	return h.s.Upload(ctx, h.id, path, r)
}

// Download opens the file at path in the sandbox; the caller closes it.
func (h *SandboxHandle) Download(ctx context.Context, path string) (io.ReadCloser, error) {
	return h.s.Download(ctx, h.id, path)
}

// ListFiles lists the directory at path in the sandbox.
func (h *SandboxHandle) ListFiles(ctx context.Context, path string) ([]FileEntry, error) {
	return h.s.ListFiles(ctx, h.id, path)
}

// MakeDir creates the directory at path in the sandbox, with its parents.
func (h *SandboxHandle) MakeDir(ctx context.Context, path string) (bool, error) {
	return h.s.MakeDir(ctx, h.id, path)
}

// RemoveFile removes path in the sandbox, recursively for a directory.
func (h *SandboxHandle) RemoveFile(ctx context.Context, path string) error {
	return h.s.RemoveFile(ctx, h.id, path)
}

// SetEnv merges changes into the sandbox's environment (nil removes a key).
func (h *SandboxHandle) SetEnv(ctx context.Context, changes map[string]*string) (*EnvResult, error) {
	return h.s.SetEnv(ctx, h.id, changes)
}

// UpdateEnv sets the pairs of set and removes the keys of unset.
func (h *SandboxHandle) UpdateEnv(ctx context.Context, set map[string]string, unset ...string) (*EnvResult, error) {
	return h.s.UpdateEnv(ctx, h.id, set, unset...)
}

// Update applies req to the sandbox.
func (h *SandboxHandle) Update(ctx context.Context, req UpdateRequest) (*Sandbox, error) {
	return h.s.Update(ctx, h.id, req)
}

// Rename gives the sandbox a new name; an empty name clears it.
func (h *SandboxHandle) Rename(ctx context.Context, name string) (*Sandbox, error) {
	return h.s.Rename(ctx, h.id, name)
}

// ClearName removes the sandbox's name.
func (h *SandboxHandle) ClearName(ctx context.Context) (*Sandbox, error) {
	return h.s.ClearName(ctx, h.id)
}

// SetAutoResume turns auto-resume on or off.
func (h *SandboxHandle) SetAutoResume(ctx context.Context, on bool) (*Sandbox, error) {
	return h.s.SetAutoResume(ctx, h.id, on)
}

// Stop stops the sandbox, keeping its disk (and memory, where it can).
func (h *SandboxHandle) Stop(ctx context.Context, opts ...LifecycleOption) (*Sandbox, error) {
	return h.s.Stop(ctx, h.id, opts...)
}

// Pause is Stop under the name other sandbox APIs use.
func (h *SandboxHandle) Pause(ctx context.Context, opts ...LifecycleOption) (*Sandbox, error) {
	return h.s.Pause(ctx, h.id, opts...)
}

// Start brings the stopped or archived sandbox back to running.
func (h *SandboxHandle) Start(ctx context.Context, opts ...LifecycleOption) (*Sandbox, error) {
	return h.s.Start(ctx, h.id, opts...)
}

// Resume is Start under the name other sandbox APIs use.
func (h *SandboxHandle) Resume(ctx context.Context, opts ...LifecycleOption) (*Sandbox, error) {
	return h.s.Resume(ctx, h.id, opts...)
}

// Archive moves the stopped sandbox's disk to cold storage.
func (h *SandboxHandle) Archive(ctx context.Context, opts ...LifecycleOption) (*Sandbox, error) {
	return h.s.Archive(ctx, h.id, opts...)
}

// WaitForState polls the sandbox until it is in state want.
func (h *SandboxHandle) WaitForState(ctx context.Context, want State) (*Sandbox, error) {
	return h.s.WaitForState(ctx, h.id, want)
}

// Resize changes the sandbox's size; see SandboxesService.Resize.
func (h *SandboxHandle) Resize(ctx context.Context, req ResizeRequest) (*ResizeResult, error) {
	return h.s.Resize(ctx, h.id, req)
}

// Metrics returns the sandbox's live figures.
func (h *SandboxHandle) Metrics(ctx context.Context) (*Metrics, error) {
	return h.s.Metrics(ctx, h.id)
}

// Usage returns the sandbox's billed usage between from and to.
func (h *SandboxHandle) Usage(ctx context.Context, from, to time.Time) (*Usage, error) {
	return h.s.Usage(ctx, h.id, from, to)
}

// Children returns the sandbox's children.
func (h *SandboxHandle) Children(ctx context.Context) ([]Sandbox, error) {
	return h.s.Children(ctx, h.id)
}

// CreateChild creates a sandbox with this one as its parent (req.ParentID
// is overwritten). The parent must be running.
func (h *SandboxHandle) CreateChild(ctx context.Context, req CreateSandboxRequest, opts ...CreateOption) (*Sandbox, error) {
	req.ParentID = h.id
	return h.s.Create(ctx, req, opts...)
}

// Delete starts deleting the sandbox; its children are not deleted.
func (h *SandboxHandle) Delete(ctx context.Context) (*Sandbox, error) {
	return h.s.Delete(ctx, h.id)
}
