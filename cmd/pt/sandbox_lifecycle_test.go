package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/platinum-dev/platinum/internal/hostapi"
	platinum "github.com/platinum-dev/platinum/sdk/go"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

// passingLine is a line of progress within a state, or of the starting
// state a restore passes through.
var passingLine = regexp.MustCompile(`(?m)^sandbox sbx_\w+: ((archiving… archive|restoring… restore) \d+%.*|starting…)\n`)

// seedState creates a busybox sandbox of type typ (empty: the default)
// and brings it to state: running, stopped, stopping (a stop that holds
// until the test ends) or archived.
func seedState(t *testing.T, srv *platinumtest.Server, state, typ string) string {
	t.Helper()
	ctx := t.Context()
	c := platinum.New(srv.URL, platinumtest.Token, platinum.WithPollInterval(5*time.Millisecond))
	sb, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Type: platinum.SandboxType(typ)}, platinum.WaitForRunning(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	switch state {
	case "running":
	case "stopping":
		srv.Host.StopFunc = stopBlocks
		_, err = c.Sandboxes.Stop(ctx, sb.ID)
	case "stopped":
		_, err = c.Sandboxes.Stop(ctx, sb.ID, platinum.WaitForStopped(30*time.Second))
	case "archived":
		if _, err = c.Sandboxes.Stop(ctx, sb.ID, platinum.WaitForStopped(30*time.Second)); err == nil {
			_, err = c.Sandboxes.Archive(ctx, sb.ID, platinum.WaitForArchived(30*time.Second))
		}
	default:
		t.Fatalf("seedState: cannot make a %s sandbox", state)
	}
	if err != nil {
		t.Fatal(err)
	}
	return sb.ID
}

// coldStart is a host start that boots from disk: no memory survives.
func coldStart(context.Context, hostapi.StartSpec) (hostapi.Instance, error) {
	return hostapi.Instance{}, nil
}

// stopBlocks is a host stop that lasts until the server closes.
func stopBlocks(ctx context.Context, _ string, _ bool) error {
	<-ctx.Done()
	return ctx.Err()
}

// stopFails is a host stop that fails with reason.
func stopFails(reason string) func(context.Context, string, bool) error {
	return func(context.Context, string, bool) error { return errors.New(reason) }
}

func TestSandboxLifecycle(t *testing.T) {
	t.Parallel()
	const disk = "restored: disk only — restart whatever the sandbox should be running\n"
	// In the wants, $ID stands for the sandbox's ID.
	tests := []struct {
		name       string
		setup      func(*platinumtest.Server)
		state, typ string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
		wantPost   string // after /v1/sandboxes/$ID/
		wantState  string // on the server afterwards; "" skips
	}{
		{name: "stop without --wait", state: "running", args: []string{"stop", "$ID"},
			wantStdout: "sandbox $ID: stopping\n", wantStderr: "follow it with `pt sandbox get $ID`, or run again with --wait\n",
			wantPost: "stop"},
		{name: "stop --wait shows progress", state: "running", args: []string{"stop", "$ID", "--wait"},
			wantStdout: "sandbox $ID: stopped\n", wantStderr: "sandbox $ID: stopping…\nsandbox $ID: stopped\n",
			wantPost: "stop", wantState: "stopped"},
		{name: "pause is stop", state: "running", args: []string{"pause", "$ID", "--wait"},
			wantStdout: "sandbox $ID: stopped\n", wantStderr: "sandbox $ID: stopping…\nsandbox $ID: stopped\n",
			wantPost: "pause", wantState: "stopped"},
		{name: "stop of a stopped sandbox", state: "stopped", args: []string{"stop", "$ID"},
			wantStdout: "sandbox $ID: stopped\n", wantPost: "stop", wantState: "stopped"},
		// An ephemeral sandbox's stop-then-delete is in the SDK's TestLifecycle:
		// what pt shows depends on which of stopped, deleting, deleted it reads.
		{name: "start --wait says memory came back", state: "stopped", args: []string{"start", "$ID", "--wait"},
			wantStdout: "sandbox $ID: running\nrestored: memory\n", wantStderr: "sandbox $ID: starting…\nsandbox $ID: running\n",
			wantPost: "start", wantState: "running"},
		{name: "start --wait from disk only", setup: func(s *platinumtest.Server) { s.Host.StartFunc = coldStart }, state: "stopped", args: []string{"start", "$ID", "--wait"},
			wantStdout: "sandbox $ID: running\n" + disk, wantStderr: "sandbox $ID: starting…\nsandbox $ID: running\n",
			wantPost: "start", wantState: "running"},
		{name: "resume restores an archived sandbox", state: "archived", args: []string{"resume", "$ID", "--wait"},
			wantStdout: "sandbox $ID: running\n" + disk, wantStderr: "sandbox $ID: restoring…\nsandbox $ID: running\n",
			wantPost: "resume", wantState: "running"},
		{name: "start of a running sandbox", state: "running", args: []string{"start", "$ID"},
			wantStdout: "sandbox $ID: running\n", wantPost: "start", wantState: "running"},
		{name: "archive --wait (the guide's example)", state: "stopped", args: []string{"archive", "$ID", "--wait"},
			wantStdout: "sandbox $ID: archived\n", wantStderr: "sandbox $ID: archiving…\nsandbox $ID: archived\n",
			wantPost: "archive", wantState: "archived"},
		{name: "archive of a running sandbox", state: "running", args: []string{"archive", "$ID"}, wantCode: 1,
			wantStderr: "pt: sandbox is running; this needs it stopped (stop it first)\nhint: only a stopped sandbox can be archived: stop it first with `pt sandbox stop $ID --wait`\n",
			wantPost:   "archive", wantState: "running"},
		{name: "start of a stopping sandbox", state: "stopping", args: []string{"start", "$ID"}, wantCode: 1,
			wantStderr: "pt: sandbox is stopping; this needs it stopped, archived or failed\nhint: the sandbox is stopping; wait until it settles (`pt sandbox get $ID`), then start it\n",
			wantPost:   "start", wantState: "stopping"},
		{name: "stop that fails", setup: func(s *platinumtest.Server) { s.Host.StopFunc = stopFails("host gone") }, state: "running", args: []string{"stop", "$ID", "--wait"}, wantCode: 1,
			wantStderr: "sandbox $ID: stopping…\nsandbox $ID: failed\npt: sandbox $ID is failed, not stopped: stop: host gone\nhint: see the sandbox with `pt sandbox get $ID`; delete it with `pt sandbox rm $ID`\n",
			wantPost:   "stop", wantState: "failed"},
		{name: "failed archive", setup: func(s *platinumtest.Server) { s.Host.DiskImageFile = filepath.Join(os.TempDir(), "no-such-disk.img") }, state: "stopped", args: []string{"archive", "$ID", "--wait"}, wantCode: 1,
			wantStderr: "sandbox $ID: archiving…\nsandbox $ID: stopped\npt: sandbox $ID is stopped, not archived: archive failed: archive: open " + filepath.Join(os.TempDir(), "no-such-disk.img") + ": no such file or directory (the local disk is intact; archive again to retry)\nhint: see the sandbox with `pt sandbox get $ID`; retry with `pt sandbox archive $ID --wait`\n",
			wantPost:   "archive", wantState: "stopped"},
		{name: "wait runs out", setup: func(s *platinumtest.Server) { s.Host.StopFunc = stopBlocks }, state: "running", args: []string{"stop", "$ID", "--wait", "--timeout", "500ms"}, wantCode: 1,
			wantStderr: "sandbox $ID: stopping…\npt: sandbox $ID is still stopping after 500ms\nhint: it keeps going in the background: check it with `pt sandbox get $ID`, or wait longer with --timeout\n",
			wantPost:   "stop", wantState: "stopping"},
		{name: "unknown sandbox", args: []string{"start", "sbx_missing"}, wantCode: 1,
			wantStderr: "pt: sandbox \"sbx_missing\": not found\nhint: list your sandboxes with `pt sandbox list`\n"},
		{name: "no ID", args: []string{"stop", "--wait"}, wantCode: 2, wantStderr: "pt: want exactly one sandbox ID\n\nusage: pt sandbox stop ID [--wait] [--timeout 10m] [--json]\n"},
		{name: "bad timeout", args: []string{"archive", "$ID", "--timeout", "0s"}, wantCode: 2, wantStderr: "pt: --timeout must be positive\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := platinumtest.NewServer(t)
			id := "sbx_missing"
			if tt.state != "" {
				id = seedState(t, srv, tt.state, tt.typ)
			}
			if tt.setup != nil {
				tt.setup(srv)
			}
			n := len(srv.Requests())
			sub := func(s string) string { return strings.ReplaceAll(s, "$ID", id) }
			var args []string
			for _, a := range tt.args {
				args = append(args, sub(a))
			}
			r := ptd(t, srv, append([]string{"sandbox"}, args...)...)
			if r.code != tt.wantCode || r.stdout != sub(tt.wantStdout) {
				t.Errorf("exit %d stdout %q; want %d %q", r.code, r.stdout, tt.wantCode, sub(tt.wantStdout))
			}
			if tt.wantCode == 2 {
				if !strings.HasPrefix(r.stderr, sub(tt.wantStderr)) || len(srv.Requests()) != n {
					t.Errorf("stderr %q, want it to start with %q; requests %q", r.stderr, sub(tt.wantStderr), srv.Requests())
				}
				return
			}
			// Progress lines and the states in between that pt happened to
			// read vary with timing; the request id varies.
			stderr := requestIDLine.ReplaceAllString(r.stderr, "")
			stderr = passingLine.ReplaceAllString(stderr, "")
			if diff := cmp.Diff(passingLine.ReplaceAllString(sub(tt.wantStderr), ""), stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if reqs := srv.Requests()[n:]; tt.wantPost != "" && (len(reqs) == 0 || !strings.HasPrefix(reqs[0], "POST /v1/sandboxes/"+id+"/"+tt.wantPost)) {
				t.Errorf("requests = %q, want POST …/%s first", reqs, tt.wantPost)
			}
			if sb, _ := srv.Sandbox(id); tt.wantState != "" && string(sb.State) != tt.wantState {
				t.Errorf("server has the sandbox %s, want %s", sb.State, tt.wantState)
			}
		})
	}
}

func TestSandboxLifecycleJSON(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	id := seedState(t, srv, "stopped", "")
	r := ptd(t, srv, "sandbox", "start", id, "--wait", "--json")
	var got struct {
		ID          string            `json:"id"`
		State       string            `json:"state"`
		Restore     *string           `json:"restore"`
		RAMRestored *bool             `json:"ram_restored"`
		Metadata    map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil {
		t.Fatalf("exit %d stdout %q stderr %q (%v)", r.code, r.stdout, r.stderr, err)
	}
	if got.ID != id || got.State != "running" || got.Restore == nil || *got.Restore != "memory" || got.RAMRestored == nil || !*got.RAMRestored || got.Metadata["last_start"] == "" {
		t.Errorf("start --json = %s", r.stdout)
	}
	if r.stderr != "sandbox "+id+": starting…\nsandbox "+id+": running\n" {
		t.Errorf("stderr = %q, want progress even with --json", r.stderr)
	}
}

func TestSandboxCreateRetentionFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		wantType   string
		wantTimers [3]int
		wantStderr string
	}{
		{"defaults", nil, "persistent", [3]int{60, 7, 0}, ""},
		{"type only", []string{"--type", "ephemeral"}, "ephemeral", [3]int{15, 0, 0}, ""},
		{"explicit zero disables", []string{"--type", "dev", "--auto-stop", "0", "--auto-delete", "3"}, "dev", [3]int{0, 30, 3}, ""},
		{"every timer", []string{"--auto-stop", "5", "--auto-archive", "1", "--auto-delete", "2"}, "persistent", [3]int{5, 1, 2}, ""},
		{"bad type", []string{"--type", "forever"}, "", [3]int{}, "pt: type: must be persistent, ephemeral or dev\nhint: check the value of --type; see the command's --help\n"},
		{"bad timer", []string{"--auto-archive", "-1"}, "", [3]int{}, "pt: auto_archive_days: must be between 0 (disabled) and 100000\nhint: check the value of --auto-archive; see the command's --help\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := platinumtest.NewServer(t)
			r := ptd(t, srv, append([]string{"sandbox", "create", "-t", "busybox", "--json"}, tt.args...)...)
			if tt.wantStderr != "" {
				if r.code != 1 || requestIDLine.ReplaceAllString(r.stderr, "") != tt.wantStderr {
					t.Errorf("exit %d stderr %q, want 1 %q", r.code, r.stderr, tt.wantStderr)
				}
				return
			}
			if r.code != 0 {
				t.Fatalf("exit %d stderr %q", r.code, r.stderr)
			}
			ret := created(t, srv, r.stdout).Retention
			if got := [3]int{ret.AutoStopMinutes, ret.AutoArchiveDays, ret.AutoDeleteDays}; ret.Type != tt.wantType || got != tt.wantTimers {
				t.Errorf("server has type %s timers %v, want %s %v", ret.Type, got, tt.wantType, tt.wantTimers)
			}
		})
	}
}

// ptWidth runs pt as ptRun does, with stdout a terminal of the given width.
func ptWidth(t *testing.T, srv *platinumtest.Server, width int, args ...string) result {
	t.Helper()
	var stdout, stderr strings.Builder
	a := &app{
		stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""),
		getenv: func(k string) string {
			return map[string]string{"PT_API_URL": srv.URL, "PT_TOKEN": platinumtest.Token}[k]
		},
		pollInterval: time.Millisecond,
		termWidth:    func() int { return width },
	}
	code := a.run(t.Context(), args)
	return result{code, stdout.String(), stderr.String()}
}

func TestSandboxListTypeColumnFits(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	seedState(t, srv, "running", "ephemeral")
	seedState(t, srv, "stopped", "")
	withType := ptWidth(t, srv, 0, "sandbox", "list").stdout
	without := ptWidth(t, srv, 1, "sandbox", "list").stdout
	if !strings.Contains(withType, " TYPE ") || !strings.Contains(withType, " ephemeral ") || strings.Contains(without, "TYPE") {
		t.Fatalf("with TYPE:\n%s\nwithout:\n%s", withType, without)
	}
	wide := maxLineWidth(withType)
	tests := []struct {
		width    int
		wantType bool
	}{
		{0, true}, // not a terminal: always the same columns
		{wide, true},
		{wide - 1, false},
		{80, false},
	}
	for _, tt := range tests {
		r := ptWidth(t, srv, tt.width, "sandbox", "list")
		if r.code != 0 || strings.Contains(r.stdout, "TYPE") != tt.wantType {
			t.Errorf("width %d: exit %d, TYPE shown = %v, want %v:\n%s", tt.width, r.code, !tt.wantType, tt.wantType, r.stdout)
		}
	}
}

func TestSandboxGetShowsLifecycle(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	ctx := t.Context()
	c := platinum.New(srv.URL, platinumtest.Token, platinum.WithPollInterval(5*time.Millisecond))
	// An ephemeral sandbox whose template (busybox) builds until the test
	// ends has never started.
	srv.Host.BuildFunc = func(ctx context.Context, slug, versionID string, _ func(string)) (string, int64, error) {
		if slug == "busybox" {
			<-ctx.Done()
			return "", 0, ctx.Err()
		}
		return "/templates/" + versionID, 1, nil
	}
	eph, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Type: platinum.SandboxType("ephemeral"), TTLMs: 3600000})
	if err != nil {
		t.Fatal(err)
	}
	// A persistent one that stopped, then started from its disk alone.
	id := seedIn(srv, platinum.CreateSandboxRequest{Template: "pt-base", Metadata: map[string]string{"team": "x"}}, true)
	srv.Host.StartFunc = coldStart
	line := func(out, key string) string {
		for l := range strings.Lines(out) {
			if strings.HasPrefix(l, key+":") {
				return strings.Join(strings.Fields(strings.TrimPrefix(l, key+":")), " ")
			}
		}
		return ""
	}
	before := ptd(t, srv, "sandbox", "get", eph.ID).stdout
	if r := ptd(t, srv, "sandbox", "start", id, "--wait"); r.code != 0 {
		t.Fatalf("start: exit %d stderr %q", r.code, r.stderr)
	}
	running := ptd(t, srv, "sandbox", "get", id).stdout
	srv.Host.StopFunc = stopBlocks
	if r := ptd(t, srv, "sandbox", "stop", id); r.code != 0 {
		t.Fatalf("stop: exit %d stderr %q", r.code, r.stderr)
	}
	stopping := ptd(t, srv, "sandbox", "get", id).stdout
	ephRec, _ := srv.Sandbox(eph.ID)
	rec, _ := srv.Sandbox(id)
	if ephRec.ExpiresAt == nil || rec.LastStart == nil {
		t.Fatalf("expires_at %v, last start %v", ephRec.ExpiresAt, rec.LastStart)
	}
	tests := []struct {
		name, out, key, want string
	}{
		{"type", before, "Type", "ephemeral"},
		{"timers", before, "Timers", "stop after 15 min idle, never archive, delete when stopped"},
		{"expiry", before, "Expires", ephRec.ExpiresAt.UTC().Format(time.RFC3339)},
		{"never started", before, "Started", ""},
		{"restored while running", running, "Restored", "disk only"},
		{"last start is not metadata", running, "Metadata", "team=x"},
		{"no restore once stopped", stopping, "Restored", ""},
		{"last start once stopped", stopping, "Started", "disk only restored, " + rec.LastStart.At.UTC().Format(time.RFC3339)},
	}
	for _, tt := range tests {
		if got := line(tt.out, tt.key); got != tt.want {
			t.Errorf("%s: %s line = %q, want %q in\n%s", tt.name, tt.key, got, tt.want, tt.out)
		}
	}
}
