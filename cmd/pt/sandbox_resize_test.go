package main

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/sdk/go/fakeptd"
)

// resizes counts the resize calls the fake got for $ID and checks the
// sandbox's size afterwards.
func resized(calls int, cpu float64, ram, disk int) func(*testing.T, *fakeptd.Server, map[string]string, result) {
	return func(t *testing.T, srv *fakeptd.Server, ids map[string]string, _ result) {
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

func TestSandboxResize(t *testing.T) {
	t.Parallel()
	running := one(fakeptd.Sandbox{CPU: 2, RAMMB: 2048, DiskGB: 20})
	const live4 = "live: the guest sees 4 cpus and 7962 MB; it can grow to 16 cpus and 16384 MB without a restart\n"
	const notLive = "pt: this running sandbox cannot change cpu or ram_mb live (cpu 32 is above this boot's maximum of 16); stop it, then resize\n" +
		"hint: it cannot be resized live: cpu 32 is above this boot's maximum of 16.\n" +
		"To resize it with a restart (in-memory state is lost), run:\n" +
		"  pt sandbox stop $ID --wait\n"
	runVerbCases(t, newFake, pt, []verbCase[*fakeptd.Server]{
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
				"  \"live\": {\n    \"max_cpu\": 16,\n    \"max_ram_mb\": 16384,\n    \"guest_cpus_online\": 4,\n    \"guest_mem_total_mb\": 1990\n  }\n}\n",
			check: resized(2, 4, 2048, 40)},
		{name: "memory shrink stops at the boot size", setup: running, args: []string{"sandbox", "resize", "$ID", "--ram", "1024"},
			wantStdout: "sandbox $ID: cpu 2, ram 2048 MB, disk 20 GB (applies now)\n" +
				"partial: the sandbox could not free memory down to 1024 MB; it has 2048 MB (and is billed for that)\n" +
				"live: the guest sees 2 cpus and 1990 MB; it can grow to 16 cpus and 16384 MB without a restart\n",
			check: resized(1, 2, 2048, 20)},
		{name: "beyond the headroom prints the commands that do it", setup: running, args: []string{"sandbox", "resize", "$ID", "--cpu", "32"}, wantCode: 1,
			wantStderr: notLive + "  pt sandbox resize $ID --cpu 32\n  pt sandbox start $ID --wait\n",
			check:      resized(1, 2, 2048, 20)},
		{name: "a refused live resize skips the disk", setup: running, args: []string{"sandbox", "resize", "$ID", "--disk", "40", "--cpu", "32"}, wantCode: 1,
			wantStderr: notLive + "  pt sandbox resize $ID --cpu 32 --disk 40\n  pt sandbox start $ID --wait\n",
			check:      resized(1, 2, 2048, 20)},
		{name: "stopped boots at the new size", setup: one(fakeptd.Sandbox{State: "stopped", CPU: 2, RAMMB: 2048, DiskGB: 20}),
			args:       []string{"sandbox", "resize", "$ID", "--cpu", "32"},
			wantStdout: "sandbox $ID: cpu 32, ram 2048 MB, disk 20 GB (applies at the next start)\n",
			wantStderr: "the sandbox is stopped: it boots at this size when it starts (`pt sandbox start $ID --wait`); its disk survives, its memory does not\n",
			check:      resized(1, 32, 2048, 20)},
		{name: "host not finished", setup: func(s *fakeptd.Server) map[string]string {
			s.ResizePending = true
			return one(fakeptd.Sandbox{State: "stopped", CPU: 2, RAMMB: 2048, DiskGB: 20})(s)
		}, args: []string{"sandbox", "resize", "$ID", "--ram", "4096"},
			wantStdout: "sandbox $ID: cpu 2, ram 4096 MB, disk 20 GB (pending)\n",
			wantStderr: "the host has not finished; check the size with `pt sandbox get $ID`\n"},
		{name: "disk shrink", setup: running, args: []string{"sandbox", "resize", "$ID", "--disk", "10"}, wantCode: 1,
			wantStderr: "pt: disk_gb can only grow; it is 20\nhint: check the value of --disk; see the command's --help\n",
			check:      resized(1, 2, 2048, 20)},
		{name: "guest cannot grow its disk online", setup: func(s *fakeptd.Server) map[string]string {
			s.DiskGrowUnsupported = true
			return running(s)
		}, args: []string{"sandbox", "resize", "$ID", "--disk", "40"}, wantCode: 1,
			wantStderr: "pt: this sandbox's filesystem cannot grow online; stop it, then resize\n" +
				"hint: its filesystem cannot grow while it runs; stop it and resize it, and it boots with one that can:\n" +
				"  pt sandbox stop $ID --wait\n  pt sandbox resize $ID --disk 40\n  pt sandbox start $ID --wait\n"},
		{name: "cpu done, disk refused", setup: func(s *fakeptd.Server) map[string]string {
			s.DiskGrowUnsupported = true
			return running(s)
		}, args: []string{"sandbox", "resize", "$ID", "--cpu", "4", "--disk", "40"}, wantCode: 1,
			wantStdout: "sandbox $ID: cpu 4, ram 2048 MB, disk 20 GB (applies now)\n" +
				"live: the guest sees 4 cpus and 1990 MB; it can grow to 16 cpus and 16384 MB without a restart\n",
			wantStderr: "cpu and memory were resized; the disk was not:\n" +
				"pt: this sandbox's filesystem cannot grow online; stop it, then resize\n" +
				"hint: its filesystem cannot grow while it runs; stop it and resize it, and it boots with one that can:\n" +
				"  pt sandbox stop $ID --wait\n  pt sandbox resize $ID --cpu 4 --disk 40\n  pt sandbox start $ID --wait\n",
			check: resized(2, 4, 2048, 20)},
		{name: "a state that cannot resize", setup: one(fakeptd.Sandbox{State: "stopping"}), args: []string{"sandbox", "resize", "$ID", "--cpu", "4"}, wantCode: 1,
			wantStderr: "pt: sandbox is stopping; resize needs it running or stopped\nhint: the sandbox is stopping, which does not allow this: check it with `pt sandbox get`\n"},
		{name: "nothing to change", setup: running, args: []string{"sandbox", "resize", "$ID"}, wantCode: 2,
			wantStderr: "pt: nothing to change: give --cpu, --ram or --disk\n"},
		{name: "no ID", args: []string{"sandbox", "resize", "--cpu", "2"}, wantCode: 2,
			wantStderr: "pt: want exactly one sandbox ID\n\nusage: pt sandbox resize ID [--cpu N] [--ram MB] [--disk GB] [--json]\n"},
	})
}

func TestSandboxMetrics(t *testing.T) {
	t.Parallel()
	withFile := func(s *fakeptd.Server) map[string]string {
		id := s.AddSandbox(fakeptd.Sandbox{CPU: 1, RAMMB: 512, DiskGB: 2})
		s.PutFile(id, "/big", make([]byte, 1<<20))
		return map[string]string{"ID": id}
	}
	runVerbCases(t, newFake, pt, []verbCase[*fakeptd.Server]{
		{name: "field list", setup: withFile, args: []string{"sandbox", "metrics", "$ID"},
			wantStdout: "" +
				"CPU:         12.5%\n" +
				"Memory:      128.0 MiB of 512.0 MiB (25%)\n" +
				"Disk:        65.0 MiB of 2.0 GiB (3%)\n" +
				"Network:     1.0 MiB in, 64.0 KiB out\n" +
				"Processes:   3\n" +
				"At:          2026-11-29T15:04:05Z\n"},
		{name: "json", setup: withFile, args: []string{"sandbox", "metrics", "$ID", "--json"},
			stdoutHas: []string{`"cpu_percent": 12.5`, `"memory_limit_bytes": 536870912`, `"disk_used_bytes": 68157440`, `"pids": 3`, `"at": "2026-11-29T15:04:05.`}},
		{name: "not running", setup: one(fakeptd.Sandbox{State: "stopped"}), args: []string{"sandbox", "metrics", "$ID"}, wantCode: 1,
			wantStderr: "pt: sandbox $ID is stopped, not running\nhint: the sandbox is stopped; it must be running: start it with `pt sandbox start ID --wait`\n"},
		{name: "no ID", args: []string{"sandbox", "metrics"}, wantCode: 2, wantStderr: "pt: want exactly one sandbox ID\n"},
	})
}

func TestSandboxUsage(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC)
	seeded := one(fakeptd.Sandbox{CPU: 2, RAMMB: 1024, DiskGB: 4, CreatedAt: fakeptd.Time{Time: t0}})
	query := func(want string) func(*testing.T, *fakeptd.Server, map[string]string, result) {
		return func(t *testing.T, srv *fakeptd.Server, ids map[string]string, _ result) {
			if got := lastRequest(srv); got != "GET /v1/sandboxes/"+ids["ID"]+"/usage"+want {
				t.Errorf("request = %q, want …/usage%s", got, want)
			}
		}
	}
	runVerbCases(t, newFake, pt, []verbCase[*fakeptd.Server]{
		{name: "one running hour", setup: seeded, args: []string{"sandbox", "usage", "$ID", "--from", "2026-11-29T13:00:00Z", "--to", "2026-11-29T14:00:00Z"},
			wantStdout: "" +
				"Sandbox:   $ID\n" +
				"From:      2026-11-29T13:00:00Z\n" +
				"To:        2026-11-29T14:00:00Z\n" +
				"Compute:   7200 cpu-seconds, 3600 GB-RAM-seconds\n" +
				"Storage:   0 GB-hours\n" +
				"\n" +
				"STATE     FROM                   TO                     CPU   RAM      DISK\n" +
				"running   2026-11-29T13:00:00Z   2026-11-29T14:00:00Z   2     1024MB   4GB\n",
			check: query("?from=2026-11-29T13%3A00%3A00.000000Z&to=2026-11-29T14%3A00%3A00.000000Z")},
		{name: "dates and json", setup: seeded, args: []string{"sandbox", "usage", "$ID", "--from", "2026-11-29", "--to", "2026-11-29T13:30:00+00:00", "--json"},
			stdoutHas: []string{`"from": "2026-11-29T13:00:00.000000Z"`, `"cpu_seconds": 3600`, `"ram_gb_seconds": 1800`, `"storage_gb_hours": 0`, `"state": "running"`},
			check:     query("?from=2026-11-29T00%3A00%3A00.000000Z&to=2026-11-29T13%3A30%3A00.000000Z")},
		{name: "default window", setup: seeded, args: []string{"sandbox", "usage", "$ID"}, stdoutHas: []string{"From:      2026-11-29T13:00:00Z\n"},
			check: query("")},
		{name: "window ends before it starts", setup: seeded, args: []string{"sandbox", "usage", "$ID", "--from", "2026-11-29T14:00:00Z", "--to", "2026-11-29T13:00:00Z"}, wantCode: 1,
			wantStderr: "pt: to must be after from\nhint: check the value of --to; see the command's --help\n"},
		{name: "bad time", setup: seeded, args: []string{"sandbox", "usage", "$ID", "--from", "yesterday"}, wantCode: 2,
			wantStderr: "pt: --from: want an RFC 3339 time (2026-11-29T15:04:05Z) or a date (2026-11-29), got \"yesterday\"\n"},
	})
}

// TestSandboxUsageBillsResizes follows a sandbox through a resize and a
// stop with pt alone, and checks usage splits the periods there.
func TestSandboxUsageBillsResizes(t *testing.T) {
	t.Parallel()
	srv := newFake(t)
	t0 := time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC)
	id := srv.AddSandbox(fakeptd.Sandbox{CPU: 2, RAMMB: 1024, DiskGB: 4, CreatedAt: fakeptd.Time{Time: t0}})
	for _, args := range [][]string{{"resize", id, "--cpu", "4"}, {"stop", id, "--wait"}} {
		if r := pt(t, srv, append([]string{"sandbox"}, args...)...); r.code != 0 {
			t.Fatalf("%q: exit %d stderr %q", args, r.code, r.stderr)
		}
	}
	r := pt(t, srv, "sandbox", "usage", id, "--from", "2026-11-29T13:00:00Z", "--to", "2026-11-29T16:00:00Z", "--json")
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
	// About two hours at 2 CPUs (the fake's clock is at 15:04), then
	// moments at 4; under an hour stopped at 4 GB.
	if u.CPUSeconds < 2*7200 || u.CPUSeconds > 2*7500 || u.StorageGBHours <= 0 || u.StorageGBHours > 4 {
		t.Errorf("cpu_seconds %v storage_gb_hours %v", u.CPUSeconds, u.StorageGBHours)
	}
}
