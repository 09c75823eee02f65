package platinum_test

import (
	"context"
	"errors"
	"math"
	"net/url"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	platinum "github.com/platinum-dev/platinum/sdk/go"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

// resizable makes a busybox sandbox of 2 CPUs, 2048 MB and 20 GB in
// state: running, stopped, stopping (a host stop that lasts until the
// server closes) or creating (a template build that does).
func resizable(t *testing.T, srv *platinumtest.Server, c *platinum.Client, state platinum.State) string {
	t.Helper()
	req := platinum.CreateSandboxRequest{Template: "busybox", CPU: 2, RAMMB: 2048, DiskGB: 20}
	switch state {
	case platinum.StateRunning, platinum.StateStopped:
		return inState(t, c, req, state)
	case platinum.StateStopping:
		id := running(t, c, req).ID
		srv.Host.StopFunc = func(ctx context.Context, _ string, _ bool) error {
			<-ctx.Done()
			return ctx.Err()
		}
		sb, err := c.Sandboxes.Stop(t.Context(), id)
		if err != nil || sb.State != platinum.StateStopping {
			t.Fatalf("stop: %v, %+v", err, sb)
		}
		return id
	case platinum.StateCreating:
		// While its template builds, a creating sandbox holds no lock and
		// a resize finds it creating (a boot would hold the resize until
		// it ends).
		srv.Host.BuildFunc = func(ctx context.Context, _, _ string, _ func(string)) (string, int64, error) {
			<-ctx.Done()
			return "", 0, ctx.Err()
		}
		sb, err := c.Sandboxes.Create(t.Context(), req)
		if err != nil || sb.State != platinum.StateCreating {
			t.Fatalf("create: %v, %+v", err, sb)
		}
		return sb.ID
	}
	t.Fatalf("resizable: cannot make a %s sandbox", state)
	return ""
}

func TestResize(t *testing.T) {
	type size struct {
		cpu       float64
		ram, disk int
	}
	tests := []struct {
		name  string
		setup func(*platinumtest.Server)
		state platinum.State
		req   platinum.ResizeRequest
		// pre runs resizes before the one under test (to grow, then shrink).
		pre []platinum.ResizeRequest

		want       *platinum.ResizeResult // ID filled in by the test
		wantSize   size                   // on the server afterwards
		wantCode   string
		wantField  string
		wantNotRes *platinum.NotResizableError // LiveResize and Hint; steps use $ID
		wantLocal  bool
	}{
		// platinumtest's guest sees what the host grants (whole CPUs of
		// quota, the memory limit); the headroom is the plan's (16 CPUs,
		// 16384 MB).
		{name: "live cpu and memory (the guide's example)", state: platinum.StateRunning, req: platinum.ResizeRequest{CPU: new(4.0), RAMMB: new(8192)},
			want: &platinum.ResizeResult{State: platinum.StateRunning, CPU: 4, RAMMB: 8192, DiskGB: 20, AppliesAt: platinum.ResizeNow,
				Requested: platinum.ResizeRequest{CPU: new(4.0), RAMMB: new(8192)},
				Live:      &platinum.LiveResize{MaxCPU: 16, MaxRAMMB: 16384, GuestCPUsOnline: 4, GuestMemTotalMB: 8192}},
			wantSize: size{4, 8192, 20}},
		{name: "live disk grow", state: platinum.StateRunning, req: platinum.ResizeRequest{DiskGB: new(30)},
			want: &platinum.ResizeResult{State: platinum.StateRunning, CPU: 2, RAMMB: 2048, DiskGB: 30, AppliesAt: platinum.ResizeNow,
				Requested: platinum.ResizeRequest{DiskGB: new(30)},
				Live:      &platinum.LiveResize{MaxCPU: 16, MaxRAMMB: 16384, GuestCPUsOnline: 2, GuestMemTotalMB: 2048}},
			wantSize: size{2, 2048, 30}},
		{name: "shrink frees less than asked", setup: func(s *platinumtest.Server) {
			// The sandbox cannot give memory back below 4096 MB.
			s.Host.ResizeFunc = func(_ context.Context, _ string, _ float64, ramMB int) error {
				if ramMB < 4096 {
					return sandbox.ErrConflict
				}
				return nil
			}
		}, state: platinum.StateRunning,
			pre: []platinum.ResizeRequest{{RAMMB: new(4096)}}, req: platinum.ResizeRequest{RAMMB: new(2048)},
			want: &platinum.ResizeResult{State: platinum.StateRunning, CPU: 2, RAMMB: 4096, DiskGB: 20, AppliesAt: platinum.ResizeNow,
				Requested: platinum.ResizeRequest{RAMMB: new(2048)}, Partial: true,
				Live: &platinum.LiveResize{MaxCPU: 16, MaxRAMMB: 16384, GuestCPUsOnline: 2, GuestMemTotalMB: 4096}},
			wantSize: size{2, 4096, 20}},
		{name: "beyond the boot's headroom", state: platinum.StateRunning, req: platinum.ResizeRequest{CPU: new(32.0)},
			wantSize: size{2, 2048, 20}, wantCode: platinum.CodeSandboxNotResizable,
			wantNotRes: &platinum.NotResizableError{
				LiveResize: platinum.LiveResizeStatus{Supported: false, Reason: "cpu 32 is above this boot's maximum of 16"},
				Hint:       platinum.ResizeHint{Action: "stop_then_resize", AppliesAt: "restart", Steps: []string{"POST /v1/sandboxes/$ID/stop", "POST /v1/sandboxes/$ID/resize"}},
			}},
		{name: "host without live resize", setup: func(s *platinumtest.Server) {
			s.Host.ResizeFunc = func(context.Context, string, float64, int) error { return sandbox.ErrUnavailable }
		}, state: platinum.StateRunning,
			req: platinum.ResizeRequest{RAMMB: new(4096)}, wantSize: size{2, 2048, 20}, wantCode: platinum.CodeSandboxNotResizable,
			wantNotRes: &platinum.NotResizableError{
				LiveResize: platinum.LiveResizeStatus{Reason: "its runtime class (runc) cannot change cpu or memory live"},
				Hint:       platinum.ResizeHint{Action: "stop_then_resize", AppliesAt: "restart", Steps: []string{"POST /v1/sandboxes/$ID/stop", "POST /v1/sandboxes/$ID/resize"}},
			}},
		{name: "memory goes no lower than the boot size", state: platinum.StateRunning,
			pre: []platinum.ResizeRequest{{RAMMB: new(4096)}}, req: platinum.ResizeRequest{RAMMB: new(1024)},
			want: &platinum.ResizeResult{State: platinum.StateRunning, CPU: 2, RAMMB: 2048, DiskGB: 20, AppliesAt: platinum.ResizeNow,
				Requested: platinum.ResizeRequest{RAMMB: new(1024)}, Partial: true,
				Live: &platinum.LiveResize{MaxCPU: 16, MaxRAMMB: 16384, GuestCPUsOnline: 2, GuestMemTotalMB: 2048}},
			wantSize: size{2, 2048, 20}},
		{name: "guest cannot grow its disk online", setup: func(s *platinumtest.Server) { s.Host.GrowErr = errors.New("the filesystem cannot grow online") },
			state: platinum.StateRunning,
			req:   platinum.ResizeRequest{DiskGB: new(40)}, wantSize: size{2, 2048, 20}, wantCode: platinum.CodeDiskGrowUnsupported},
		{name: "disk shrink", state: platinum.StateRunning, req: platinum.ResizeRequest{DiskGB: new(10)},
			wantSize: size{2, 2048, 20}, wantCode: platinum.CodeInvalidRequest, wantField: "disk_gb"},
		{name: "disk together with cpu", state: platinum.StateRunning, req: platinum.ResizeRequest{CPU: new(4.0), DiskGB: new(40)},
			wantSize: size{2, 2048, 20}, wantCode: platinum.CodeInvalidRequest, wantField: "disk_gb"},
		{name: "stopped resizes at the next start, beyond the old headroom", state: platinum.StateStopped,
			pre: []platinum.ResizeRequest{{DiskGB: new(40)}}, req: platinum.ResizeRequest{CPU: new(32.0), RAMMB: new(65536)},
			want: &platinum.ResizeResult{State: platinum.StateStopped, CPU: 32, RAMMB: 65536, DiskGB: 40, AppliesAt: platinum.ResizeNextStart,
				Requested: platinum.ResizeRequest{CPU: new(32.0), RAMMB: new(65536)}},
			wantSize: size{32, 65536, 40}},
		// The host is still stopping the sandbox: ptd records the size and
		// answers 202 pending.
		{name: "host not finished", state: platinum.StateStopping, req: platinum.ResizeRequest{CPU: new(4.0)},
			want: &platinum.ResizeResult{State: platinum.StateStopping, CPU: 4, RAMMB: 2048, DiskGB: 20, AppliesAt: platinum.ResizePending,
				Requested: platinum.ResizeRequest{CPU: new(4.0)}},
			wantSize: size{4, 2048, 20}},
		{name: "a state that cannot resize", state: platinum.StateCreating, req: platinum.ResizeRequest{CPU: new(4.0)},
			wantSize: size{2, 2048, 20}, wantCode: platinum.CodeConflict},
		{name: "nothing to change", state: platinum.StateRunning, wantSize: size{2, 2048, 20}, wantLocal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := newServer(t, tt.setup)
			id := resizable(t, srv, c, tt.state)
			for _, r := range tt.pre {
				if _, err := c.Sandboxes.Resize(t.Context(), id, r); err != nil {
					t.Fatal(err)
				}
			}
			n := len(srv.Requests())
			res, err := c.Sandboxes.Resize(t.Context(), id, tt.req)
			got, _ := srv.Sandbox(id)
			if have := (size{got.CPU, got.RAMMB, got.DiskGB}); have != tt.wantSize {
				t.Errorf("server size = %+v, want %+v", have, tt.wantSize)
			}
			reqs := srv.Requests()[n:]
			switch {
			case tt.wantLocal:
				if err == nil || len(reqs) != 0 {
					t.Fatalf("err = %v after %q, want a local error", err, reqs)
				}
				return
			case !slices.Equal(reqs, []string{"POST /v1/sandboxes/" + id + "/resize"}):
				t.Errorf("requests = %q", reqs)
			}
			var nre *platinum.NotResizableError
			if isNR := errors.As(err, &nre); isNR != (tt.wantCode == platinum.CodeSandboxNotResizable) {
				t.Errorf("err = %v: NotResizableError %v", err, isNR)
			}
			if tt.wantCode != "" {
				var ae *platinum.APIError
				if !errors.As(err, &ae) || ae.Code != tt.wantCode || ae.Field() != tt.wantField || ae.StatusCode != map[bool]int{true: 400, false: 409}[tt.wantCode == platinum.CodeInvalidRequest] {
					t.Fatalf("err = %v, want APIError %s field %q", err, tt.wantCode, tt.wantField)
				}
				if tt.wantNotRes != nil {
					want := *tt.wantNotRes
					for i, s := range want.Hint.Steps {
						want.Hint.Steps[i] = "POST /v1/sandboxes/" + id + s[len("POST /v1/sandboxes/$ID"):]
					}
					if !reflect.DeepEqual(nre.LiveResize, want.LiveResize) || !reflect.DeepEqual(nre.Hint, want.Hint) {
						t.Errorf("NotResizableError = %+v %+v, want %+v %+v", nre.LiveResize, nre.Hint, want.LiveResize, want.Hint)
					}
					if nre.Error() != ae.Error() || !platinum.IsCode(err, platinum.CodeSandboxNotResizable) {
						t.Errorf("Error() = %q, want the API error's %q", nre.Error(), ae.Error())
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := *tt.want
			want.ID = id
			if !reflect.DeepEqual(res, &want) {
				t.Errorf("result =\n%+v (live %+v)\nwant\n%+v (live %+v)", res, res.Live, want, want.Live)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	_, c := newServer(t)
	id := running(t, c, platinum.CreateSandboxRequest{CPU: 1, RAMMB: 512, DiskGB: 2}).ID
	stopped := inState(t, c, platinum.CreateSandboxRequest{}, platinum.StateStopped)
	m, err := c.Sandboxes.Metrics(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	// platinumtest's host measures nothing (there is no container); it
	// reports the sandbox's limits, which ptd passes on.
	want := platinum.Metrics{MemoryLimitBytes: 512 << 20, DiskSizeBytes: 2 << 30, At: m.At}
	if *m != want || m.At.IsZero() {
		t.Errorf("Metrics = %+v, want %+v", *m, want)
	}
	if _, err := c.Sandboxes.Metrics(t.Context(), stopped); !platinum.IsCode(err, platinum.CodeSandboxNotReady) {
		t.Errorf("metrics of a stopped sandbox: err = %v, want sandbox_not_ready", err)
	}
	if _, err := c.Sandboxes.Metrics(t.Context(), "sbx_missing"); !platinum.IsNotFound(err) {
		t.Errorf("metrics of an unknown sandbox: err = %v, want not_found", err)
	}
}

func TestUsage(t *testing.T) {
	srv, c := newServer(t)
	ctx := t.Context()
	sb := running(t, c, platinum.CreateSandboxRequest{CPU: 2, RAMMB: 1024, DiskGB: 4})
	id := sb.ID
	// ptd bills from the times it recorded, on the real clock: the windows
	// start when the sandbox began to run and end in the future, which ptd
	// bills as if the sandbox stays as it is.
	u, err := c.Sandboxes.Usage(ctx, id, time.Time{}, time.Time{})
	if err != nil || len(u.Periods) == 0 || u.Periods[len(u.Periods)-1].State != platinum.StateRunning {
		t.Fatalf("Usage = %+v, %v; want it to end running", u, err)
	}
	t0 := u.Periods[len(u.Periods)-1].From
	query := func(from, to time.Time) string {
		const layout = "2006-01-02T15:04:05.000000Z" // what the SDK sends
		return "?from=" + url.QueryEscape(from.Format(layout)) + "&to=" + url.QueryEscape(to.Format(layout))
	}

	t.Run("one running hour", func(t *testing.T) {
		u, err := c.Sandboxes.Usage(ctx, id, t0, t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		want := &platinum.Usage{ID: id, From: t0, To: t0.Add(time.Hour), CPUSeconds: 7200, RAMGBSeconds: 3600,
			Periods: []platinum.UsagePeriod{{State: platinum.StateRunning, From: t0, To: t0.Add(time.Hour), CPU: 2, RAMMB: 1024, DiskGB: 4}}}
		if !reflect.DeepEqual(u, want) {
			t.Errorf("Usage =\n%+v\nwant\n%+v", u, want)
		}
		if last := srv.Requests()[len(srv.Requests())-1]; last != "GET /v1/sandboxes/"+id+"/usage"+query(t0, t0.Add(time.Hour)) {
			t.Errorf("request = %q", last)
		}
	})

	t.Run("billed at the old size up to a resize, then the new", func(t *testing.T) {
		if _, err := c.Sandboxes.Resize(ctx, id, platinum.ResizeRequest{CPU: new(4.0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Sandboxes.Stop(ctx, id, platinum.WaitForStopped(30*time.Second)); err != nil {
			t.Fatal(err)
		}
		end := t0.Add(3 * time.Hour)
		u, err := c.Sandboxes.Usage(ctx, id, t0, end)
		if err != nil {
			t.Fatal(err)
		}
		var states []platinum.State
		var cpus []float64
		var cpuSec, storage float64
		for i, p := range u.Periods {
			states, cpus = append(states, p.State), append(cpus, p.CPU)
			if i > 0 && !p.From.Equal(u.Periods[i-1].To) {
				t.Errorf("period %d starts at %v, not where the last ended (%v)", i, p.From, u.Periods[i-1].To)
			}
			switch p.State {
			case platinum.StateRunning:
				cpuSec += p.CPU * p.To.Sub(p.From).Seconds()
			case platinum.StateStopped:
				storage += float64(p.DiskGB) * p.To.Sub(p.From).Hours()
			}
		}
		if want := []platinum.State{"running", "running", "stopping", "stopped"}; !slices.Equal(states, want) {
			t.Fatalf("period states = %q, want %q", states, want)
		}
		if want := []float64{2, 4, 4, 4}; !slices.Equal(cpus, want) {
			t.Errorf("period cpus = %v, want %v", cpus, want)
		}
		if !u.Periods[0].From.Equal(t0) || !u.Periods[3].To.Equal(end) {
			t.Errorf("periods span %v..%v, want the window", u.Periods[0].From, u.Periods[3].To)
		}
		// Stopped for nearly all of the three hours, at 4 GB.
		if math.Abs(u.CPUSeconds-cpuSec) > 1e-6 || math.Abs(u.StorageGBHours-storage) > 1e-9 || u.StorageGBHours < 4*2.9 {
			t.Errorf("cpu_seconds %v storage_gb_hours %v, want %v and %v", u.CPUSeconds, u.StorageGBHours, cpuSec, storage)
		}
	})

	t.Run("default window", func(t *testing.T) {
		u, err := c.Sandboxes.Usage(ctx, id, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if !u.From.Equal(sb.CreatedAt) || !u.To.After(t0) {
			t.Errorf("window %v..%v, want from the sandbox's creation (%v)", u.From, u.To, sb.CreatedAt)
		}
		if last := srv.Requests()[len(srv.Requests())-1]; last != "GET /v1/sandboxes/"+id+"/usage" {
			t.Errorf("request = %q, want no window", last)
		}
	})

	t.Run("bad window", func(t *testing.T) {
		_, err := c.Sandboxes.Usage(ctx, id, t0, t0.Add(-time.Hour))
		var ae *platinum.APIError
		if !errors.As(err, &ae) || ae.Code != platinum.CodeInvalidRequest || ae.Field() != "to" {
			t.Errorf("err = %v, want invalid_request on to", err)
		}
	})
}
