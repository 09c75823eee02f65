package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/crashpoint"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Workspaces: each context (org, vault, workflow or agent session) has one
// named volume in the workspace store, a tar of its /workspace directory in
// the object store. A session's sandbox gets it restored before the session
// is ready; stopping the session saves it back before the sandbox is
// disposed of. Nothing else of the sandbox (installed packages, /root, …)
// survives. The tar is made and unpacked inside the sandbox, so it works
// the same on every runtime class.

// WorkspaceName is the name of a context's workspace volume: stable per
// (org, vault, workflow | agent session), unguessable across contexts.
func WorkspaceName(ses Session) string {
	kind, id := "workflow", ses.WorkflowID
	if id == "" {
		kind, id = "agent_session", ses.AgentSessionID
	}
	h := sha256.Sum256([]byte(strings.Join([]string{ses.OrgID, ses.VaultID, kind, id}, "\x00")))
	return "ws_" + hex.EncodeToString(h[:16])
}

func workspaceKey(ses Session) string {
	return "workspaces/" + ses.OrgID + "/" + WorkspaceName(ses) + ".tar"
}

// workspaceExists reports whether the context has a saved workspace.
func (s *Service) workspaceExists(ctx context.Context, ses Session) (bool, error) {
	if s.cfg.Objects == nil {
		return false, nil
	}
	_, err := s.cfg.Objects.Stat(ctx, s.cfg.WorkspaceBucket, workspaceKey(ses))
	if errors.Is(err, objstore.ErrNotFound) || errors.Is(err, sandbox.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("workspace store: %w", err)
	}
	return true, nil
}

// workspaceSavedSince reports whether the context's workspace was written
// at or after t (a stop that a crash interrupted after its save).
func (s *Service) workspaceSavedSince(ctx context.Context, ses Session, t time.Time) bool {
	if s.cfg.Objects == nil {
		return false
	}
	info, err := s.cfg.Objects.Stat(ctx, s.cfg.WorkspaceBucket, workspaceKey(ses))
	return err == nil && !info.ModTime.Before(t.Truncate(time.Second))
}

// makeWorkspaceDir creates the (empty) workspace directory.
func (s *Service) makeWorkspaceDir(ctx context.Context, sb sandbox.Sandbox) error {
	ag := s.core.AgentFor(sb)
	if _, err := ag.MakeDir(ctx, s.cfg.WorkspacePath); err != nil {
		return fmt.Errorf("workspace dir: %w", err)
	}
	return nil
}

// restoreWorkspace fills the sandbox's workspace directory from the
// context's saved workspace; without one it only makes sure the directory
// exists.
func (s *Service) restoreWorkspace(ctx context.Context, ses Session, sb sandbox.Sandbox) error {
	has, err := s.workspaceExists(ctx, ses)
	if err != nil {
		return err
	}
	if !has {
		return s.makeWorkspaceDir(ctx, sb)
	}
	rc, err := s.cfg.Objects.Get(ctx, s.cfg.WorkspaceBucket, workspaceKey(ses))
	if err != nil {
		return fmt.Errorf("workspace store: %w", err)
	}
	defer rc.Close()
	ag := s.core.AgentFor(sb)
	tmp := "/tmp/.pt-workspace-" + ses.ID + ".tar"
	if err := ag.Upload(ctx, tmp, rc); err != nil {
		return err
	}
	dir := s.cfg.WorkspacePath
	return s.sessionShell(ctx, sb, fmt.Sprintf("mkdir -p %s && tar -C %s -xf %s; rc=$?; rm -f %s; exit $rc", dir, dir, tmp, tmp))
}

// saveWorkspace writes the sandbox's workspace directory to the context's
// volume, replacing what was there (atomically: readers see the old or the
// new tar).
func (s *Service) saveWorkspace(ctx context.Context, ses Session, sb sandbox.Sandbox) error {
	if s.cfg.Objects == nil {
		return fmt.Errorf("no object store configured for workspaces: %w", sandbox.ErrUnavailable)
	}
	if err := s.cfg.Objects.EnsureBucket(ctx, s.cfg.WorkspaceBucket); err != nil {
		return fmt.Errorf("workspace store: %w", err)
	}
	dir := s.cfg.WorkspacePath
	tmp := "/tmp/.pt-workspace-" + ses.ID + ".tar"
	if err := s.sessionShell(ctx, sb, fmt.Sprintf("mkdir -p %s /tmp && tar -C %s -cf %s .", dir, dir, tmp)); err != nil {
		return err
	}
	crashpoint.Hit("session.stop.saving") // the tar is made, not yet stored
	ag := s.core.AgentFor(sb)
	rc, err := ag.Download(ctx, tmp)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := s.cfg.Objects.Put(ctx, s.cfg.WorkspaceBucket, workspaceKey(ses), rc, objstore.SizeUnknown); err != nil {
		return fmt.Errorf("workspace store: %w", err)
	}
	s.log.InfoContext(ctx, "workspace saved", "session", ses.ID, "workspace", WorkspaceName(ses))
	return nil
}

// sessionShell runs a /bin/sh script as root in the sandbox and fails
// unless it exits 0.
func (s *Service) sessionShell(ctx context.Context, sb sandbox.Sandbox, script string) error {
	ag := s.core.AgentFor(sb)
	var stderr strings.Builder
	res, err := ag.Exec(ctx, execRequest(script), nil, func(b []byte) {
		if stderr.Len() < 4096 {
			stderr.Write(b)
		}
	})
	if err != nil {
		return err
	}
	if res.Code != 0 {
		return fmt.Errorf("workspace: %q exited %d: %s", script, res.Code, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// execRequest runs script with /bin/sh, bounded like a stop.
func execRequest(script string) agentclient.ExecRequest {
	return agentclient.ExecRequest{Cmd: "/bin/sh", Args: []string{"-c", script}, Timeout: 10 * time.Minute}
}
