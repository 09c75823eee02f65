package controlplane

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestCreateGPUs: a create gets GPUs only when the host has that many
// usable ones (of the model); otherwise it is a GPUsUnavailableError
// naming what exists, and nothing is recorded. The host is told at start.
func TestCreateGPUs(t *testing.T) {
	var started atomic.Int32
	h := &fakeHost{
		GPUs: []GPU{
			{Index: 0, Model: "NVIDIA A100-SXM4-40GB", Device: "/dev/nvidia0", CDIDevice: "nvidia.com/gpu=0"},
			{Index: 1, Model: "NVIDIA A100-SXM4-40GB", Device: "/dev/nvidia1", CDIDevice: "nvidia.com/gpu=1"},
			{Index: 2, Model: "NVIDIA H100 80GB HBM3", Device: "/dev/nvidia2"}, // no CDI device
		},
		GPUProblem: "1 of 3 GPUs have no CDI device",
	}
	h.StartFunc = func(ctx context.Context, spec StartSpec) (Instance, error) {
		if spec.GPUs == 2 && spec.GPUModel == "a100" {
			started.Add(1)
		}
		return Instance{Address: "100.64.0.9"}, nil
	}
	s, _ := newTestService(t, h)
	ctx := context.Background()

	sb := running(t, s, CreateRequest{Template: "busybox", GPUs: 2, GPUModel: " a100 "})
	if sb.GPUs != 2 || sb.GPUModel != "a100" || started.Load() != 1 {
		t.Fatalf("record gpus %d model %q, host told %d times", sb.GPUs, sb.GPUModel, started.Load())
	}
	if got, _ := s.Get(ctx, org, sb.ID, false); got.GPUs != 2 {
		t.Errorf("stored gpus %d", got.GPUs)
	}

	_, before, _ := s.List(ctx, org, ListRequest{Include: []string{"failed", "destroyed"}})
	for _, tc := range []struct {
		n     int
		model string
		want  []string
	}{
		{3, "", []string{"3 GPUs requested", "host_test has 2 × NVIDIA A100-SXM4-40GB"}},
		{1, "H100", []string{`1 "H100" GPU requested`, "host_test has none that sandboxes can use (1 of 3 GPUs have no CDI device)"}},
	} {
		_, err := s.Create(ctx, org, CreateRequest{Template: "busybox", GPUs: tc.n, GPUModel: tc.model})
		var ge *GPUsUnavailableError
		if !errors.As(err, &ge) || !errors.Is(err, sandbox.ErrConflict) {
			t.Fatalf("gpus %d %q: %v, want GPUsUnavailableError", tc.n, tc.model, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("gpus %d %q: %q does not say %q", tc.n, tc.model, err, w)
			}
		}
		if len(ge.Hosts) != 1 || ge.Hosts[0].HostID != "host_test" {
			t.Errorf("hosts %+v", ge.Hosts)
		}
	}
	for _, tc := range []struct {
		req   CreateRequest
		field string
	}{
		{CreateRequest{Template: "busybox", GPUs: MaxGPUs + 1}, "gpus"},
		{CreateRequest{Template: "busybox", GPUs: -1}, "gpus"},
		{CreateRequest{Template: "busybox", GPUModel: "A100"}, "gpu_model"},
		{CreateRequest{Template: "busybox", GPUs: 1, GPUModel: strings.Repeat("x", 129)}, "gpu_model"},
	} {
		_, err := s.Create(ctx, org, tc.req)
		var fe *sandbox.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want a bad %s", tc.req, err, tc.field)
		}
	}
	if _, after, _ := s.List(ctx, org, ListRequest{Include: []string{"failed", "destroyed"}}); after != before {
		t.Errorf("refused creates recorded sandboxes: %d before, %d after", before, after)
	}
}

// TestGPUSandboxSnapshotsDiskOnly: a GPU sandbox's memory cannot be
// snapshotted, whatever its class can do.
func TestGPUSandboxSnapshotsDiskOnly(t *testing.T) {
	ok, why := memorySnapshots(memSnapper{}, sandbox.Sandbox{Runtime: "gvisor", GPUs: 1})
	if ok || !strings.Contains(why, "GPU") {
		t.Errorf("GPU sandbox: %v %q", ok, why)
	}
	if ok, _ := memorySnapshots(memSnapper{}, sandbox.Sandbox{Runtime: "gvisor"}); !ok {
		t.Error("a sandbox without GPUs lost its memory snapshots")
	}
}

// memSnapper can snapshot memory of every class.
type memSnapper struct{ Snapshotter }

func (memSnapper) MemorySnapshots(string) (bool, string) { return true, "" }
