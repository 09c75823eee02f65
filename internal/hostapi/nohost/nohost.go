// Package nohost is the host of a ptd that runs no sandboxes (ptd serve
// --role=api, docs/operating.md): a hostapi.Host with no runtime class,
// whose every sandbox operation answers sandbox.ErrUnavailable. The
// control plane over it serves what needs only the shared store, and
// forwarding (internal/forward) sends every request for a sandbox, and
// every create, to the ptd of a host that runs sandboxes.
package nohost

import (
	"context"
	"fmt"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/template"
)

// Host runs nothing. Its ID names the api process in leases and logs; it
// is never registered as a host, so no sandbox is placed on it.
type Host struct{ id string }

// New returns the host of an api process named id.
func New(id string) *Host { return &Host{id: id} }

var _ hostapi.Host = (*Host)(nil)

func unavailable(what string) error {
	return fmt.Errorf("%s: this ptd runs no sandboxes (--role=api): %w", what, sandbox.ErrUnavailable)
}

// ID implements hostapi.Host.
func (h *Host) ID() string { return h.id }

// Templates implements hostapi.Host: the built-in slugs, whose versions
// the hosts build and record in the shared store.
func (h *Host) Templates() []string { return template.Registry{}.Slugs() }

// Classes implements hostapi.Host: none.
func (h *Host) Classes() []string { return nil }

// Info implements hostapi.Host.
func (h *Host) Info() hostapi.HostInfo { return hostapi.HostInfo{ID: h.id} }

// BuildTemplate implements hostapi.Host.
func (h *Host) BuildTemplate(context.Context, string, string, func(string)) (string, int64, error) {
	return "", 0, unavailable("build a template")
}

// Start implements hostapi.Host.
func (h *Host) Start(context.Context, hostapi.StartSpec) (hostapi.Instance, error) {
	return hostapi.Instance{}, unavailable("start a sandbox")
}

// Running implements hostapi.Host.
func (h *Host) Running(context.Context, string) bool { return false }

// Stop implements hostapi.Host.
func (h *Host) Stop(context.Context, string, bool) (bool, error) {
	return false, unavailable("stop a sandbox")
}

// Frozen implements hostapi.Host.
func (h *Host) Frozen(context.Context, string) bool { return false }

// DiskImage implements hostapi.Host.
func (h *Host) DiskImage(context.Context, string) (string, error) {
	return "", unavailable("read a disk")
}

// DiskImagePath implements hostapi.Host.
func (h *Host) DiskImagePath(string) string { return "" }

// RemoveDisk implements hostapi.Host.
func (h *Host) RemoveDisk(context.Context, string) error { return nil }

// Resize implements hostapi.Host.
func (h *Host) Resize(context.Context, string, float64, int) error {
	return unavailable("resize a sandbox")
}

// GrowDisk implements hostapi.Host.
func (h *Host) GrowDisk(context.Context, string, int) error { return unavailable("grow a disk") }

// Metrics implements hostapi.Host.
func (h *Host) Metrics(context.Context, string) (hostapi.Metrics, error) {
	return hostapi.Metrics{}, unavailable("read metrics")
}

// Destroy implements hostapi.Host: there is nothing here to remove.
func (h *Host) Destroy(context.Context, string) error { return nil }
