package e2e

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestGoSDKSandboxCalls drives the sandbox API's calls through the public Go
// SDK against the real ptd: connect, rename, env, auto-resume, live
// resize, metrics, usage, children and the iterator.
func TestGoSDKSandboxCalls(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	cl := platinum.New(env.url, env.token)
	create := func(req platinum.CreateSandboxRequest) *platinum.Sandbox {
		t.Helper()
		sb, err := cl.Sandboxes.Create(ctx, req, platinum.WaitForRunning(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
		return sb
	}
	parent := create(platinum.CreateSandboxRequest{Template: "busybox", CPU: 1, RAMMB: 256, Env: map[string]string{"OLD": "x"}})
	if !parent.AutoResume {
		t.Error("auto_resume is not on by default")
	}
	sbx, err := cl.Sandboxes.Connect(ctx, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	name := "ci-runner-" + randHex(4)
	if got, err := sbx.Rename(ctx, name); err != nil || got.Name != name {
		t.Fatalf("rename: %v %v", got, err)
	}
	other := create(platinum.CreateSandboxRequest{Template: "busybox", AutoResume: new(false)})
	if other.AutoResume {
		t.Error("auto_resume: false at create did not stick")
	}
	if got, err := cl.Sandboxes.SetAutoResume(ctx, other.ID, true); err != nil || !got.AutoResume {
		t.Errorf("turn auto_resume back on: %+v %v", got, err)
	}
	var ae *platinum.APIError
	if _, err := cl.Sandboxes.Rename(ctx, other.ID, name); !errors.As(err, &ae) || ae.StatusCode != 409 {
		t.Errorf("rename to a live sandbox's name: %v", err)
	}
	if got, err := sbx.ClearName(ctx); err != nil || got.Name != "" {
		t.Errorf("clear name: %v %v", got, err)
	}
	if _, err := cl.Sandboxes.Rename(ctx, other.ID, name); err != nil {
		t.Errorf("rename to the freed name: %v", err)
	}
	// Auto-resume off does not touch the running sandbox.
	if got, err := sbx.SetAutoResume(ctx, false); err != nil || got.AutoResume || got.State != platinum.StateRunning {
		t.Errorf("set auto_resume off: %+v %v", got, err)
	}
	v := "new"
	er, err := sbx.SetEnv(ctx, map[string]*string{"API_TOKEN": &v, "OLD": nil})
	if err != nil || er.Applies != "next_exec" || !slices.Equal(er.EnvKeys, []string{"API_TOKEN"}) {
		t.Fatalf("set env: %+v %v", er, err)
	}
	if res, err := sbx.Exec(ctx, platinum.ExecRequest{Shell: `echo "$API_TOKEN ${OLD-unset}"`}); err != nil || res.Stdout != "new unset\n" {
		t.Errorf("exec after set env: %+v %v", res, err)
	}
	// Live resize: the guest's own view comes back.
	cpu, ram := 2.0, 512
	rr, err := sbx.Resize(ctx, platinum.ResizeRequest{CPU: &cpu, RAMMB: &ram})
	if err != nil || rr.AppliesAt != platinum.ResizeNow || rr.CPU != 2 || rr.RAMMB != 512 || rr.Live == nil ||
		rr.Live.GuestCPUsOnline != min(2, runtime.NumCPU()) || rr.Live.GuestMemTotalMB != 512 || rr.Live.MaxCPU < 2 {
		t.Fatalf("live resize: %+v %v", rr, err)
	}
	over := rr.Live.MaxCPU + 1
	if _, err := sbx.Resize(ctx, platinum.ResizeRequest{CPU: &over}); !platinum.IsCode(err, platinum.CodeSandboxNotResizable) {
		t.Errorf("resize beyond the headroom: %v", err)
	}
	// Metrics: cgroup memory, the disk and the network (traffic to ptd's
	// API on the gateway).
	if _, err := sbx.Exec(ctx, platinum.ExecRequest{Shell: `wget -qO /dev/null "$PT_API_URL/v1/health" || true`}); err != nil {
		t.Fatal(err)
	}
	// A busy loop shows as live CPU use.
	if _, err := sbx.Exec(ctx, platinum.ExecRequest{Shell: `sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & echo $! > /tmp/busy`}); err != nil {
		t.Fatal(err)
	}
	// The loop shows within a few 100 ms windows however busy the host.
	m, err := sbx.Metrics(ctx)
	for i := 0; i < 20 && err == nil && m.CPUPercent <= 0; i++ {
		m, err = sbx.Metrics(ctx)
	}
	if err != nil || m.MemoryLimitBytes != 512<<20 || m.MemoryUsedBytes <= 0 || m.DiskSizeBytes <= 0 || m.DiskUsedBytes <= 0 ||
		m.NetRxBytes <= 0 || m.NetTxBytes <= 0 || m.PIDs < 2 || m.CPUPercent <= 0 {
		t.Errorf("metrics: %+v %v", m, err)
	}
	if _, err := sbx.Exec(ctx, platinum.ExecRequest{Shell: `kill $(cat /tmp/busy)`}); err != nil {
		t.Fatal(err)
	}
	u, err := sbx.Usage(ctx, time.Time{}, time.Time{})
	if err != nil || u.CPUSeconds <= 0 || u.RAMGBSeconds <= 0 || u.StorageGBHours != 0 || len(u.Periods) < 2 {
		t.Fatalf("usage: %+v %v", u, err)
	}
	// Billed at the old size up to the live resize, the new one after.
	if first, last := u.Periods[0], u.Periods[len(u.Periods)-1]; first.CPU != 1 || first.RAMMB != 256 || last.CPU != 2 || last.RAMMB != 512 ||
		last.State != platinum.StateRunning {
		t.Errorf("usage periods: %+v", u.Periods)
	}
	// Children: create, list by parent and roots, iterate, delete order.
	child, err := sbx.CreateChild(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForRunning(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), child.ID) })
	if child.ParentID != parent.ID {
		t.Errorf("child's parent_id %q", child.ParentID)
	}
	if kids, err := sbx.Children(ctx); err != nil || len(kids) != 1 || kids[0].ID != child.ID {
		t.Errorf("children: %v %v", kids, err)
	}
	var seen []string
	for s, err := range cl.Sandboxes.Iterate(ctx, platinum.ListOptions{ParentID: parent.ID, Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, s.ID)
	}
	if !slices.Equal(seen, []string{child.ID}) {
		t.Errorf("iterate by parent: %v", seen)
	}
	roots := map[string]bool{}
	for s, err := range cl.Sandboxes.Iterate(ctx, platinum.ListOptions{RootsOnly: true, State: platinum.StateRunning, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if roots[s.ID] {
			t.Errorf("iterate returned %s twice", s.ID)
		}
		roots[s.ID] = true
	}
	if !roots[parent.ID] || !roots[other.ID] || roots[child.ID] {
		t.Errorf("iterate roots: parent %v other %v child %v", roots[parent.ID], roots[other.ID], roots[child.ID])
	}
	if _, err := sbx.Delete(ctx); !errors.As(err, &ae) || ae.StatusCode != 409 || !slices.Equal(ae.Children(), []string{child.ID}) {
		t.Errorf("delete a parent with a live child: %v", err)
	}
}
