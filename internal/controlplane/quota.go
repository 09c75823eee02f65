package controlplane

import (
	"context"
	"errors"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// checkTreeQuota makes sure a new child of parentID (cpu, ram) keeps its
// tree within TreeMaxSandboxes, TreeMaxCPU and TreeMaxRAMMB: children
// count against their ancestors' quotas, so an agent cannot fork itself
// past its plan by spawning sandboxes.
func (s *Service) checkTreeQuota(ctx context.Context, orgID, parentID string, cpu float64, ram int) error {
	root, err := s.treeRoot(ctx, orgID, parentID)
	if err != nil {
		return err
	}
	members, err := s.treeMembers(ctx, orgID, root)
	if err != nil {
		return err
	}
	count, sumCPU, sumRAM := 1, cpu, ram // the new sandbox
	for _, sb := range members {
		count++
		sumCPU += sb.CPU
		sumRAM += sb.RAMMB
	}
	return s.treeWithin(count, sumCPU, sumRAM)
}

// treeRoot follows parent links up from id to the top of its tree. A
// parent already purged ends the walk (its children lose the link anyway).
func (s *Service) treeRoot(ctx context.Context, orgID, id string) (string, error) {
	child := ""
	for i := 0; i < 64; i++ { // parent links are set once, so no cycles; bound anyway
		sb, err := s.store.GetSandbox(ctx, orgID, id)
		if errors.Is(err, store.ErrNotFound) && child != "" {
			return child, nil
		}
		if err != nil {
			return "", err
		}
		if sb.ParentID == "" {
			return id, nil
		}
		child, id = id, sb.ParentID
	}
	return id, nil
}

// treeMembers lists the live sandboxes of the tree under root, root
// included.
func (s *Service) treeMembers(ctx context.Context, orgID, root string) ([]sandbox.Sandbox, error) {
	var out []sandbox.Sandbox
	queue := []string{root}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		sb, err := s.store.GetSandbox(ctx, orgID, id)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			return nil, err
		}
		if sb.State.Live() {
			out = append(out, sb)
		}
		kids, _, err := s.store.ListSandboxes(ctx, store.ListOptions{OrgID: orgID, ParentID: id})
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			queue = append(queue, k.ID)
		}
	}
	return out, nil
}

// checkTreeResize keeps a resize of a tree member (a child, or a parent
// with children) within its tree's cpu and ram limits, as at create: a
// child created small cannot grow its tree past them afterwards. A
// top-level sandbox without children is in no tree.
func (s *Service) checkTreeResize(ctx context.Context, sb sandbox.Sandbox, r ResizeRequest) error {
	cpu, ram := r.sizes(sb)
	if cpu <= sb.CPU && ram <= sb.RAMMB {
		return nil
	}
	root, err := s.treeRoot(ctx, sb.OrgID, sb.ID)
	if err != nil {
		return err
	}
	members, err := s.treeMembers(ctx, sb.OrgID, root)
	if err != nil || len(members) < 2 {
		return err
	}
	sumCPU, sumRAM := cpu, ram
	for _, m := range members {
		if m.ID != sb.ID {
			sumCPU += m.CPU
			sumRAM += m.RAMMB
		}
	}
	// The count does not change: only cpu and ram can go over.
	return s.treeWithin(0, sumCPU, sumRAM)
}

// treeWithin checks a tree's totals against the tree limits.
func (s *Service) treeWithin(count int, sumCPU float64, sumRAM int) error {
	switch {
	case s.cfg.TreeMaxSandboxes > 0 && count > s.cfg.TreeMaxSandboxes:
		return &sandbox.QuotaError{Scope: "tree", Limit: "sandboxes", Max: float64(s.cfg.TreeMaxSandboxes), Wanted: float64(count)}
	case s.cfg.TreeMaxCPU > 0 && sumCPU > s.cfg.TreeMaxCPU:
		return &sandbox.QuotaError{Scope: "tree", Limit: "cpu", Max: s.cfg.TreeMaxCPU, Wanted: sumCPU}
	case s.cfg.TreeMaxRAMMB > 0 && sumRAM > s.cfg.TreeMaxRAMMB:
		return &sandbox.QuotaError{Scope: "tree", Limit: "ram_mb", Max: float64(s.cfg.TreeMaxRAMMB), Wanted: float64(sumRAM)}
	}
	return nil
}
