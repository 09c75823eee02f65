package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
	platinum "github.com/platinum-dev/platinum/sdk/go"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

// resized counts the resize calls ptd got for $ID and checks the
// sandbox's size afterwards.
func resized(calls int, cpu float64, ram, disk int) func(*testing.T, *platinumtest.Server, map[string]string, result) {
	return func(t *testing.T, srv *platinumtest.Server, ids map[string]string, _ result) {
		n := 0
		for _, r := range srv.Requests() {
			if r == "POST /v1/sandboxes/"+ids["ID"]+"/resize" {
				n++
			}
		}
		sb, _ := srv.Sandbox(ids["ID"])
		if n != calls || sb.CPU != cpu || sb.RAMMB != ram || sb.DiskGB != disk {
			t.Errorf("%d resize calls, size %v/%d/%d; want %d, %v/%d/%d", n, sb.CPU, sb.RAMMB, sb.DiskGB, calls, cpu, ram, disk)
		}
	}
}

// sized seeds, as $ID, a busybox sandbox of 2 CPUs, 2048 MB and 20 GB in
// state: running, stopped, stopping (a host stop that lasts until the
// server closes) or creating (its template builds until then, and a
// creating sandbox holds no lock meanwhile). tune, when set, changes the
// test host first.
func sized(state platinum.State, tune func(*platinumtest.Server)) func(*platinumtest.Server) map[string]string {
	return func(s *platinumtest.Server) map[string]string {
		if tune != nil {
			tune(s)
		}
		ctx := context.Background()
		req := platinum.CreateSandboxRequest{Template: "busybox", CPU: 2, RAMMB: 2048, DiskGB: 20}
		c := platinum.New(s.URL, platinumtest.Token, platinum.WithPollInterval(5*time.Millisecond))
		var id string
		var err error
		switch state {
		case platinum.StateRunning, platinum.StateStopped:
			id = seedIn(s, req, state == platinum.StateStopped)
		case platinum.StateStopping:
			id = seedIn(s, req, false)
			s.Host.StopFunc = stopBlocks
			_, err = c.Sandboxes.Stop(ctx, id)
		case platinum.StateCreating:
			s.Host.BuildFunc = func(ctx context.Context, _, _ string, _ func(string)) (string, int64, error) {
				<-ctx.Done()
				return "", 0, ctx.Err()
			}
			var sb *platinum.Sandbox
			if sb, err = c.Sandboxes.Create(ctx, req); err == nil {
				id = sb.ID
			}
		default:
			err = errors.New("cannot make a " + string(state) + " sandbox")
		}
		if err != nil {
			panic("sized: " + err.Error())
		}
		return map[string]string{"ID": id}
	}
}

// diskCannotGrow is a host whose sandboxes' filesystems cannot grow
// online.
func diskCannotGrow(s *platinumtest.Server) {
	s.Host.GrowErr = errors.New("the guest's filesystem cannot grow online")
}

func TestSandboxResize(t *testing.T) {
	t.Parallel()
	running := sized(platinum.StateRunning, nil)
	// platinumtest's guest sees what the host grants; the headroom is the
	// plan's (16 CPUs, 16384 MB).
	const live4 = "live: the guest sees 4 cpus and 8192 MB; it can grow to 16 cpus and 16384 MB without a restart\n"
	const notLive = "pt: this running sandbox cannot change cpu or ram_mb live (cpu 32 is above this boot's maximum of 16); stop it, then resize\n" +
		"hint: it cannot be resized live: cpu 32 is above this boot's maximum of 16.\n" +
		"To resize it with a restart (in-memory state is lost), run:\n" +
		"  pt sandbox stop $ID --wait\n"
	runVerbCases(t, startPtd, ptd, []verbCase[*platinumtest.Server]{
		{name: "live cpu and memory", setup: running, args: []string{"sandbox", "resize", "$ID", "--cpu", "4", "--ram", "8192"},
			wantStdout: "sandbox $ID: cpu 4, ram 8192 MB, disk 20 GB (applies now)\n" + live4,
			check:      resized(1, 4, 8192, 20)},
		{name: "disk with cpu and memory (the guide's example) takes two calls", setup: running,
			args:       []string{"sandbox", "resize", "$ID", "--cpu", "4", "--ram", "8192", "--disk", "40"},
			wantStdout: "sandbox $ID: cpu 4, ram 8192 MB, disk 40 GB (applies now)\n" + live4,
			check:      resized(2, 4, 8192, 40)},
		{name: "json combines the two calls", setup: running, args: []string{"sandbox", "resize", "$ID", "--json", "--disk", "40", "--cpu", "4"},
			wantStdout: "{\n  \"id\": \"$ID\",\n  \"state\": \"running\",\n  \"cpu\": 4,\n  \"ram_mb\": 2048,\n  \"disk_gb\": 40,\n  \"applies_at\": \"now\",\n" +
				"  \"requested\": {\n    \"cpu\": 4,\n    \"disk_gb\": 40\n  },\n  \"partial\": false,\n" +
				"  \"live\": {\n    \"max_cpu\": 16,\n    \"max_ram_mb\": 16384,\n    \"guest_cpus_online\": 4,\n    \"guest_mem_total_mb\": 2048\n  }\n}\n",
			check: resized(2, 4, 2048, 40)},
		{name: "memory shrink stops at the boot size", setup: running, args: []string{"sandbox", "resize", "$ID", "--ram", "1024"},
			wantStdout: "sandbox $ID: cpu 2, ram 2048 MB, disk 20 GB (applies now)\n" +
				"partial: the sandbox could not free memory down to 1024 MB; it has 2048 MB (and is billed for that)\n" +
				"live: the guest sees 2 cpus and 2048 MB; it can grow to 16 cpus and 16384 MB without a restart\n",
			check: resized(1, 2, 2048, 20)},
		{name: "beyond the headroom prints the commands that do it", setup: running, args: []string{"sandbox", "resize", "$ID", "--cpu", "32"}, wantCode: 1,
			wantStderr: notLive + "  pt sandbox resize $ID --cpu 32\n  pt sandbox start $ID --wait\n",
			check:      resized(1, 2, 2048, 20)},
		{name: "a refused live resize skips the disk", setup: running, args: []string{"sandbox", "resize", "$ID", "--disk", "40", "--cpu", "32"}, wantCode: 1,
			wantStderr: notLive + "  pt sandbox resize $ID --cpu 32 --disk 40\n  pt sandbox start $ID --wait\n",
			check:      resized(1, 2, 2048, 20)},
		{name: "stopped boots at the new size", setup: sized(platinum.StateStopped, nil),
			args:       []string{"sandbox", "resize", "$ID", "--cpu", "32"},
			wantStdout: "sandbox $ID: cpu 32, ram 2048 MB, disk 20 GB (applies at the next start)\n",
			wantStderr: "the sandbox is stopped: it boots at this size when it starts (`pt sandbox start $ID --wait`); its disk survives, its memory does not\n",
			check:      resized(1, 32, 2048, 20)},
		// The host is still stopping the sandbox: ptd records the size and
		// answers 202 pending.
		{name: "host not finished", setup: sized(platinum.StateStopping, nil), args: []string{"sandbox", "resize", "$ID", "--ram", "4096"},
			wantStdout: "sandbox $ID: cpu 2, ram 4096 MB, disk 20 GB (pending)\n",
			wantStderr: "the host has not finished; check the size with `pt sandbox get $ID`\n",
			check:      resized(1, 2, 4096, 20)},
		{name: "disk shrink", setup: running, args: []string{"sandbox", "resize", "$ID", "--disk", "10"}, wantCode: 1,
			wantStderr: "pt: disk_gb: disk_gb can only grow (it is 20)\nhint: check the value of --disk; see the command's --help\n",
			check:      resized(1, 2, 2048, 20)},
		{name: "guest cannot grow its disk online", setup: sized(platinum.StateRunning, diskCannotGrow), args: []string{"sandbox", "resize", "$ID", "--disk", "40"}, wantCode: 1,
			wantStderr: "pt: the disk could not grow online (the guest's filesystem cannot grow online); it keeps its size: stop the sandbox, resize it, and start it\n" +
				"hint: its filesystem cannot grow while it runs; stop it and resize it, and it boots with one that can:\n" +
				"  pt sandbox stop $ID --wait\n  pt sandbox resize $ID --disk 40\n  pt sandbox start $ID --wait\n",
			check: resized(1, 2, 2048, 20)},
		{name: "cpu done, disk refused", setup: sized(platinum.StateRunning, diskCannotGrow), args: []string{"sandbox", "resize", "$ID", "--cpu", "4", "--disk", "40"}, wantCode: 1,
			wantStdout: "sandbox $ID: cpu 4, ram 2048 MB, disk 20 GB (applies now)\n" +
				"live: the guest sees 4 cpus and 2048 MB; it can grow to 16 cpus and 16384 MB without a restart\n",
			wantStderr: "cpu and memory were resized; the disk was not:\n" +
				"pt: the disk could not grow online (the guest's filesystem cannot grow online); it keeps its size: stop the sandbox, resize it, and start it\n" +
				"hint: its filesystem cannot grow while it runs; stop it and resize it, and it boots with one that can:\n" +
				"  pt sandbox stop $ID --wait\n  pt sandbox resize $ID --cpu 4 --disk 40\n  pt sandbox start $ID --wait\n",
			check: resized(2, 4, 2048, 20)},
		{name: "a state that cannot resize", setup: sized(platinum.StateCreating, nil), args: []string{"sandbox", "resize", "$ID", "--cpu", "4"}, wantCode: 1,
			wantStderr: "pt: sandbox is creating; this needs it running or stopped to resize\nhint: the sandbox is creating, which does not allow this: check it with `pt sandbox get`\n",
			check:      resized(1, 2, 2048, 20)},
		{name: "nothing to change", setup: running, args: []string{"sandbox", "resize", "$ID"}, wantCode: 2,
			wantStderr: "pt: nothing to change: give --cpu, --ram or --disk\n"},
		{name: "no ID", args: []string{"sandbox", "resize", "--cpu", "2"}, wantCode: 2,
			wantStderr: "pt: want exactly one sandbox ID\n\nusage: pt sandbox resize ID [--cpu N] [--ram MB] [--disk GB] [--json]\n"},
	})
}

func TestSandboxMetrics(t *testing.T) {
	t.Parallel()
	// The test host measures nothing: it answers these figures.
	measured := func(s *platinumtest.Server) {
		s.Host.MetricsFunc = func(string) (hostapi.Metrics, error) {
			return hostapi.Metrics{CPUPercent: 12.5, MemoryUsedBytes: 128 << 20, MemoryLimitBytes: 512 << 20,
				DiskUsedBytes: 65 << 20, DiskSizeBytes: 2 << 30, NetRxBytes: 1 << 20, NetTxBytes: 64 << 10, Pids: 3,
				At: time.Date(2026, 11, 29, 15, 4, 5, 0, time.UTC)}, nil
		}
	}
	withMetrics := func(s *platinumtest.Server) map[string]string {
		measured(s)
		return map[string]string{"ID": seedIn(s, platinum.CreateSandboxRequest{CPU: 1, RAMMB: 512, DiskGB: 2}, false)}
	}
	runVerbCases(t, startPtd, ptd, []verbCase[*platinumtest.Server]{
		{name: "field list", setup: withMetrics, args: []string{"sandbox", "metrics", "$ID"},
			wantStdout: "" +
				"CPU:         12.5%\n" +
				"Memory:      128.0 MiB of 512.0 MiB (25%)\n" +
				"Disk:        65.0 MiB of 2.0 GiB (3%)\n" +
				"Network:     1.0 MiB in, 64.0 KiB out\n" +
				"Processes:   3\n" +
				"At:          2026-11-29T15:04:05Z\n"},
		{name: "json", setup: withMetrics, args: []string{"sandbox", "metrics", "$ID", "--json"},
			stdoutHas: []string{`"cpu_percent": 12.5`, `"memory_limit_bytes": 536870912`, `"disk_used_bytes": 68157440`, `"pids": 3`, `"at": "2026-11-29T15:04:05.`}},
		{name: "not running", setup: seed(platinum.CreateSandboxRequest{}, true), args: []string{"sandbox", "metrics", "$ID"}, wantCode: 1,
			wantStderr: "pt: sandbox is stopped; it must be running (wait with ?wait_for_state=running, or start it)\nhint: the sandbox is stopped; it must be running: start it with `pt sandbox start ID --wait`\n"},
		{name: "no ID", args: []string{"sandbox", "metrics"}, wantCode: 2, wantStderr: "pt: want exactly one sandbox ID\n"},
	})
}

// billed seeds a running busybox sandbox of 2 CPUs, 1024 MB and 4 GB as
// $ID and returns, besides, what its usage windows need: ptd bills from
// the times it recorded, on the real clock. $RUN is when it began to run
// (API time format), $FROM the next whole second (RFC 3339), $TO an hour
// later, $HALF half an hour later (with a +00:00 offset), $DAY the date it
// was created, $CREATED when (both formats), $HALFCPU and $HALFRAM what
// ptd bills from its creation to $HALF. The windows end in the future,
// which ptd bills as if the sandbox stays as it is.
func billed(s *platinumtest.Server) map[string]string {
	id := seedIn(s, platinum.CreateSandboxRequest{CPU: 2, RAMMB: 1024, DiskGB: 4}, false)
	c := platinum.New(s.URL, platinumtest.Token)
	u, err := c.Sandboxes.Usage(context.Background(), id, time.Time{}, time.Time{})
	if err != nil || len(u.Periods) == 0 || u.Periods[len(u.Periods)-1].State != platinum.StateRunning {
		panic("billed: usage does not end running")
	}
	run := u.Periods[len(u.Periods)-1].From
	from := run.Truncate(time.Second).Add(time.Second)
	half := from.Add(30 * time.Minute)
	ran := half.Sub(run).Seconds()
	cpu, _ := json.Marshal(2 * ran)
	ram, _ := json.Marshal(float64(1024) / 1024 * ran)
	return map[string]string{"ID": id, "RUN": sandbox.FormatTime(run), "FROM": from.Format(time.RFC3339), "TO": from.Add(time.Hour).Format(time.RFC3339),
		"HALF": half.Format("2006-01-02T15:04:05") + "+00:00", "DAY": u.From.Format(time.DateOnly),
		"CREATEDAPI": sandbox.FormatTime(u.From), "CREATED": u.From.Format(time.RFC3339), "HALFCPU": string(cpu), "HALFRAM": string(ram)}
}

func TestSandboxUsage(t *testing.T) {
	t.Parallel()
	query := func(from, to string) func(*testing.T, *platinumtest.Server, map[string]string, result) {
		return func(t *testing.T, srv *platinumtest.Server, ids map[string]string, _ result) {
			want := ""
			if from != "" {
				// What pt sends: the API's time format.
				api := func(s string) string {
					tm, err := time.Parse(time.RFC3339, s)
					if err != nil {
						tm, err = time.Parse(time.DateOnly, s)
					}
					if err != nil {
						t.Fatal(err)
					}
					return url.QueryEscape(tm.UTC().Format("2006-01-02T15:04:05.000000Z"))
				}
				want = "?from=" + api(ids[from]) + "&to=" + api(ids[to])
			}
			if got := lastRequest(srv); got != "GET /v1/sandboxes/"+ids["ID"]+"/usage"+want {
				t.Errorf("request = %q, want …/usage%s", got, want)
			}
		}
	}
	runVerbCases(t, startPtd, ptd, []verbCase[*platinumtest.Server]{
		{name: "one running hour", setup: billed, args: []string{"sandbox", "usage", "$ID", "--from", "$FROM", "--to", "$TO"},
			wantStdout: "" +
				"Sandbox:   $ID\n" +
				"From:      $FROM\n" +
				"To:        $TO\n" +
				"Compute:   7200 cpu-seconds, 3600 GB-RAM-seconds\n" +
				"Storage:   0 GB-hours\n" +
				"\n" +
				"STATE     FROM                   TO                     CPU   RAM      DISK\n" +
				"running   $FROM   $TO   2     1024MB   4GB\n",
			check: query("FROM", "TO")},
		// From the day's start: ptd bills from the sandbox's creation.
		{name: "dates and json", setup: billed, args: []string{"sandbox", "usage", "$ID", "--from", "$DAY", "--to", "$HALF", "--json"},
			stdoutHas: []string{`"from": "$CREATEDAPI"`, `"cpu_seconds": $HALFCPU,`, `"ram_gb_seconds": $HALFRAM,`, `"storage_gb_hours": 0`, `"state": "running"`},
			check:     query("DAY", "HALF")},
		{name: "default window", setup: billed, args: []string{"sandbox", "usage", "$ID"}, stdoutHas: []string{"From:      $CREATED\n"},
			check: query("", "")},
		{name: "window ends before it starts", setup: billed, args: []string{"sandbox", "usage", "$ID", "--from", "$TO", "--to", "$FROM"}, wantCode: 1,
			wantStderr: "pt: to must be after from\nhint: check the value of --to; see the command's --help\n"},
		{name: "bad time", setup: billed, args: []string{"sandbox", "usage", "$ID", "--from", "yesterday"}, wantCode: 2,
			wantStderr: "pt: --from: want an RFC 3339 time (2026-11-29T15:04:05Z) or a date (2026-11-29), got \"yesterday\"\n"},
	})
}

// TestSandboxUsageBillsResizes follows a sandbox through a resize and a
// stop with pt alone, and checks usage splits the periods there.
func TestSandboxUsageBillsResizes(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	ids := billed(srv)
	id := ids["ID"]
	for _, args := range [][]string{{"resize", id, "--cpu", "4"}, {"stop", id, "--wait"}} {
		if r := ptd(t, srv, append([]string{"sandbox"}, args...)...); r.code != 0 {
			t.Fatalf("%q: exit %d stderr %q", args, r.code, r.stderr)
		}
	}
	// From when it began to run to three hours later.
	run, err := time.Parse(time.RFC3339Nano, ids["RUN"])
	if err != nil {
		t.Fatal(err)
	}
	r := ptd(t, srv, "sandbox", "usage", id, "--from", ids["RUN"], "--to", run.Add(3*time.Hour).Format(time.RFC3339Nano), "--json")
	var u struct {
		Periods []struct {
			State string  `json:"state"`
			CPU   float64 `json:"cpu"`
		} `json:"periods"`
		CPUSeconds     float64 `json:"cpu_seconds"`
		StorageGBHours float64 `json:"storage_gb_hours"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &u); r.code != 0 || err != nil {
		t.Fatalf("exit %d stdout %q (%v)", r.code, r.stdout, err)
	}
	var got []string
	for _, p := range u.Periods {
		got = append(got, p.State+"@"+formatCPU(p.CPU))
	}
	if want := []string{"running@2", "running@4", "stopping@4", "stopped@4"}; !slices.Equal(got, want) {
		t.Errorf("periods = %q, want %q", got, want)
	}
	// Moments at 2 CPUs, then at 4; then stopped at 4 GB for nearly all
	// of the three hours.
	if u.CPUSeconds <= 0 || u.CPUSeconds > 4*60 || u.StorageGBHours < 4*2.9 || u.StorageGBHours > 4*3 {
		t.Errorf("cpu_seconds %v storage_gb_hours %v", u.CPUSeconds, u.StorageGBHours)
	}
}
