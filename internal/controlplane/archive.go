package controlplane

import (
	"context"
	"fmt"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Archive moves a stopped sandbox's disk to the object store and frees
// the local disk. Only a stopped sandbox can be archived.
func (s *Service) Archive(ctx context.Context, p Principal, id string) (sandbox.Sandbox, error) {
	return sandbox.Sandbox{}, fmt.Errorf("archive: no object store configured: %w", sandbox.ErrUnavailable)
}

func (s *Service) doArchive(ctx context.Context, id string) {
	s.transition(ctx, id, sandbox.StateArchiving, sandbox.StateStopped, func(sb *sandbox.Sandbox) {
		sb.Reason = "archive interrupted; the local disk is intact"
	})
}

func (s *Service) doUnarchive(ctx context.Context, id string) {
	s.transition(ctx, id, sandbox.StateRestoring, sandbox.StateArchived, func(sb *sandbox.Sandbox) {
		sb.Reason = "restore interrupted; start again"
	})
}
