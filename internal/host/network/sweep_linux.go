package network

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
)

// HasNamespace reports whether id's named network namespace exists on
// the host, whether or not this manager knows its endpoint.
func (m *Manager) HasNamespace(id string) bool {
	nsName, _ := m.names(id)
	_, err := os.Stat(filepath.Join(netnsDir, nsName))
	return err == nil
}

// RemoveUnknown removes the network namespaces (and host veths) of this
// bridge whose names belong to none of the sandbox IDs in known and to no
// endpoint the manager holds: what a crash left of sandboxes that are
// gone, which Detach can no longer be asked for by ID (the names are
// hashes). It returns the namespaces it removed.
func (m *Manager) RemoveUnknown(ctx context.Context, known []string) ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// What to keep is read after the directory: a namespace listed there
	// was made by an attach that had reserved its address before, so an
	// attach still under way (no endpoint yet, nothing else of its sandbox
	// on the host) is kept by its reservation. Without it, a sweep while
	// creates were slow removed the namespace of one in progress, and its
	// `runc run` failed on the missing namespace path.
	keep := map[string]bool{}
	for _, id := range known {
		ns, _ := m.names(id)
		keep[ns] = true
	}
	for _, ep := range m.Endpoints() {
		keep[filepath.Base(ep.NetNSPath)] = true
	}
	m.mu.Lock()
	for _, id := range m.used {
		ns, _ := m.names(id)
		keep[ns] = true
	}
	m.mu.Unlock()
	// Only namespaces whose host veth is on this bridge are ours: the
	// names carry no bridge, and another manager on the host (a second
	// ptd, a test's) keeps its own sandboxes' namespaces under the same
	// prefix. One whose veth is gone or elsewhere is left alone.
	br, err := netlink.LinkByName(m.cfg.Bridge)
	if err != nil {
		return nil, fmt.Errorf("sweep: bridge %s: %w", m.cfg.Bridge, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if ctx.Err() != nil {
			return removed, ctx.Err()
		}
		h, ok := strings.CutPrefix(e.Name(), m.cfg.NetNSPrefix)
		if !ok || len(h) != hashLen || keep[e.Name()] {
			continue
		}
		if link, err := netlink.LinkByName(vethPrefix + h); err != nil || link.Attrs().MasterIndex != br.Attrs().Index {
			continue
		}
		if err := m.remove(e.Name(), vethPrefix+h); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}
