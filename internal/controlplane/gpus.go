package controlplane

import (
	"fmt"
	"sort"
	"strings"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// GPUs at create (docs/gpus.md): a sandbox asks for whole GPUs of its
// host, optionally of a model; the create is refused, before anything is
// recorded, when no host has that many that sandboxes can use.

// MaxGPUs bounds gpus at create.
const MaxGPUs = 16

// maxGPUModelLen bounds gpu_model.
const maxGPUModelLen = 128

// GPU is one GPU of a host.
type GPU = hostapi.GPU

// HostGPUs is what one host can give sandboxes.
type HostGPUs struct {
	HostID string
	// GPUs counts the usable GPUs (of the model asked for); Models has
	// one entry per such GPU.
	GPUs   int
	Models []string
	// Problem says why GPUs the host has cannot go to sandboxes.
	Problem string
}

// GPUsUnavailableError is a create asking for more GPUs than any host can
// give (409 gpus_unavailable); Hosts is what exists.
type GPUsUnavailableError struct {
	Requested int
	Model     string
	Hosts     []HostGPUs
}

func (e *GPUsUnavailableError) Error() string {
	what := fmt.Sprintf("%d GPU", e.Requested)
	if e.Model != "" {
		what = fmt.Sprintf("%d %q GPU", e.Requested, e.Model)
	}
	if e.Requested != 1 {
		what += "s"
	}
	var hosts []string
	for _, h := range e.Hosts {
		switch {
		case h.GPUs == 0 && h.Problem != "":
			hosts = append(hosts, fmt.Sprintf("%s has none that sandboxes can use (%s)", h.HostID, h.Problem))
		case h.GPUs == 0:
			hosts = append(hosts, h.HostID+" has none")
		default:
			hosts = append(hosts, fmt.Sprintf("%s has %s", h.HostID, countModels(h.Models)))
		}
	}
	return fmt.Sprintf("%s requested, but no host has that many that sandboxes can use: %s", what, strings.Join(hosts, "; "))
}

// Unwrap makes errors.Is(err, sandbox.ErrConflict) hold.
func (e *GPUsUnavailableError) Unwrap() error { return sandbox.ErrConflict }

// countModels reads "2 × NVIDIA A100-SXM4-40GB, 1 × NVIDIA H100 80GB HBM3".
func countModels(models []string) string {
	n := map[string]int{}
	for _, m := range models {
		n[m]++
	}
	names := make([]string, 0, len(n))
	for m := range n {
		names = append(names, m)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, m := range names {
		parts[i] = fmt.Sprintf("%d × %s", n[m], m)
	}
	return strings.Join(parts, ", ")
}

// validateGPUs checks gpus and gpu_model at create and that a host can
// give that many usable GPUs of the model.
func (s *Service) validateGPUs(n int, model string) error {
	switch {
	case n < 0 || n > MaxGPUs:
		return &sandbox.FieldError{Field: "gpus", Reason: fmt.Sprintf("must be between 0 and %d", MaxGPUs)}
	case len(model) > maxGPUModelLen:
		return &sandbox.FieldError{Field: "gpu_model", Reason: fmt.Sprintf("must be at most %d bytes", maxGPUModelLen)}
	case model != "" && n == 0:
		return &sandbox.FieldError{Field: "gpu_model", Reason: "needs gpus of at least 1"}
	case n == 0:
		return nil
	}
	have := hostGPUs(s.host.Info(), model)
	if have.GPUs >= n {
		return nil
	}
	return &GPUsUnavailableError{Requested: n, Model: model, Hosts: []HostGPUs{have}}
}

// hostGPUs is what a host can give sandboxes of model.
func hostGPUs(info HostInfo, model string) HostGPUs {
	out := HostGPUs{HostID: info.ID, Models: []string{}, Problem: info.GPUProblem}
	for _, g := range info.GPUs {
		if g.Usable() && hostapi.MatchGPUModel(g.Model, model) {
			out.GPUs++
			out.Models = append(out.Models, g.Model)
		}
	}
	return out
}

// memorySnapshots says whether sb's memory can be snapshotted: where its
// class can checkpoint on this host, and never with GPUs (their memory
// is on the devices, which a checkpoint does not save).
func memorySnapshots(snapper Snapshotter, sb sandbox.Sandbox) (bool, string) {
	if sb.GPUs > 0 {
		return false, "a GPU sandbox's memory is partly on its GPUs, which a checkpoint does not save"
	}
	return snapper.MemorySnapshots(sb.Runtime)
}
