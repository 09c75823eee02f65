package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// runtimeCmd returns the runtime binary of class and its state directory
// under the daemon's data dir (internal/host: runtime, runtime-gvisor).
func runtimeCmd(d *ptdtest.Daemon, class string) (string, string) {
	if class == "gvisor" {
		return "runsc", filepath.Join(d.DataDir, "runtime-gvisor")
	}
	return "runc", filepath.Join(d.DataDir, "runtime")
}

// procsNaming returns the host processes whose command line holds every
// one of words.
func procsNaming(words ...string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		all := true
		for _, w := range words {
			all = all && strings.Contains(cmd, w)
		}
		if all {
			out = append(out, pid)
		}
	}
	return out
}

// events returns the sandbox's events of typ, oldest first.
func (a *api) events(id, typ string) []map[string]any {
	a.t.Helper()
	code, m, b := a.do("GET", "/v1/events?format=json&sandbox_id="+id+"&type="+typ, nil)
	if code != 200 {
		a.t.Fatalf("events: %d %s", code, b)
	}
	var out []map[string]any
	rows, _ := m["rows"].([]any)
	for _, r := range rows {
		out = append(out, r.(map[string]any))
	}
	return out
}

// TestAgentKilled: the host process of a sandbox's container killed
// (pt-agent, a runc sandbox's first process, or a gVisor sandbox's
// Sentry; as the host's OOM killer, a crash or an operator would) ends
// the sandbox's container. ptd sees it end at once:
// the exec in flight in it answers 503 then (a gVisor sandbox killed
// outright closes no connection, so it waited for TCP to give up), the
// event feed says so (`processes_lost`), and the sandbox starts again
// cold on its own disk without waiting for the reconciler (its interval
// is ten minutes here): the data written before is there, commands run
// again, and a later stop and start work as usual. Never failed, never
// stuck.
func TestAgentKilled(t *testing.T) {
	d := startPtd(t, ptdtest.Options{ExtraArgs: []string{"--reconcile-interval", "10m"}})
	a := apiOf(t, d)
	for _, class := range []string{"runc", "gvisor"} {
		t.Run(class, func(t *testing.T) {
			a := &api{t: t, url: a.url, token: a.token}
			id := a.create(class, nil)
			want := fill(a, id, "/root/data")
			inFlight := make(chan string, 1)
			go func() {
				body := strings.NewReader(`{"cmd":"echo started > /tmp/started; sleep 600","timeout_ms":900000}`)
				req, _ := http.NewRequest("POST", a.url+"/v1/sandboxes/"+id+"/exec", body)
				req.Header.Set("Authorization", "Bearer "+a.token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					inFlight <- err.Error()
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				inFlight <- fmt.Sprintf("%d %s", resp.StatusCode, b)
			}()
			for a.sh(id, "cat /tmp/started 2>/dev/null || true") == "" {
				time.Sleep(100 * time.Millisecond)
			}
			// The host process the runtime names: runc's is pt-agent, runsc's
			// the sandbox's Sentry, whose end closes no connection.
			bin, root := runtimeCmd(d, class)
			out, err := exec.Command(bin, "--root", root, "state", id).Output()
			if err != nil {
				t.Fatalf("%s state %s: %v", bin, id, err)
			}
			var st struct{ Pid int }
			if err := json.Unmarshal(out, &st); err != nil || st.Pid <= 0 {
				t.Fatalf("%s state %s: %v: %s", bin, id, err, out)
			}
			if err := syscall.Kill(st.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-inFlight:
				// runc's kernel closes the connection itself, maybe first.
				if !strings.HasPrefix(got, "503 ") || class == "gvisor" && !strings.Contains(got, "the sandbox ended") {
					t.Errorf("the exec in flight answered %s, want 503 saying the sandbox ended", got)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("the exec in flight did not answer within 2 minutes of the kill")
			}
			deadline := time.Now().Add(3 * time.Minute)
			for {
				if m := a.get(id); m["state"] == "failed" || m["state"] == "stopped" {
					t.Fatalf("after pt-agent was killed the sandbox is %v", m)
				}
				if len(a.events(id, "processes_lost")) > 0 {
					code, m, _ := a.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": "true", "timeout_ms": 30000})
					if code == 200 && m["exit_code"] == float64(0) {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("no processes_lost event and no working exec %s after the kill: %v", 3*time.Minute, a.get(id))
				}
				time.Sleep(time.Second)
			}
			ev := a.events(id, "processes_lost")[0]
			if data, _ := ev["data"].(map[string]any); data["action"] != "restarted" || !strings.Contains(fmt.Sprint(data["reason"]), "ended on its host") {
				t.Errorf("processes_lost event = %v, want action restarted, saying the container ended on its host", ev)
			}
			if got := sum(a, id, "/root/data"); got != want {
				t.Fatalf("after the restart the data reads %s, want %s", got, want)
			}
			a.stop(id)
			a.start(id)
			if got := sum(a, id, "/root/data"); got != want {
				t.Fatalf("after a stop and start the data reads %s, want %s", got, want)
			}
			a.do("DELETE", "/v1/sandboxes/"+id, nil)
		})
	}
}

// TestRuntimeKilledMidCheckpoint: a gVisor stop checkpoints the sandbox's
// memory to disk; killing every runsc process of the sandbox while that
// checkpoint runs ends the stop stopped disk-only (or failed with a
// reason), never stuck in stopping. A start then boots it with the data
// its disk held, and no runsc process of it is left once it is deleted.
func TestRuntimeKilledMidCheckpoint(t *testing.T) {
	d := startPtd(t, ptdtest.Options{})
	a := apiOf(t, d)
	id := a.create("gvisor", map[string]any{"ram_mb": 512})
	want := fill(a, id, "/root/data")
	// 192 MB of memory (incompressible) to write out makes the checkpoint
	// take a while.
	a.sh(id, "mkdir -p /dev/shm && head -c 64000000 /dev/urandom > /dev/shm/a && cat /dev/shm/a /dev/shm/a /dev/shm/a > /dev/shm/b && rm /dev/shm/a")
	if code, _, b := a.do("POST", "/v1/sandboxes/"+id+"/stop", nil); code != 202 && code != 200 {
		t.Fatalf("stop: %d %s", code, b)
	}
	killed := 0
	for deadline := time.Now().Add(2 * time.Minute); killed == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no runsc checkpoint of %s seen within 2 minutes: %v", id, a.get(id))
		}
		if len(procsNaming("runsc", "checkpoint", id)) == 0 {
			if m := a.get(id); m["state"] != "stopping" && m["state"] != "running" {
				t.Fatalf("the stop ended %v before a checkpoint was seen", m["state"])
			}
			continue
		}
		for _, pid := range procsNaming("runsc", id) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
	}
	t.Logf("killed %d runsc processes of %s mid-checkpoint", killed, id)
	m := a.settle(id, 3*time.Minute)
	t.Logf("the stop ended %v (reason %q)", m["state"], m["reason"])
	switch m["state"] {
	case "stopped":
	case "failed":
		if r, _ := m["reason"].(string); r == "" {
			t.Fatalf("failed with no reason: %v", m)
		}
	default:
		t.Fatalf("the stop whose runtime was killed ended %v, want stopped or failed", m)
	}
	a.start(id)
	if got := sum(a, id, "/root/data"); got != want {
		t.Fatalf("after the start the data reads %s, want %s", got, want)
	}
	if code, _, b := a.do("DELETE", "/v1/sandboxes/"+id, nil); code != 202 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if m := a.settle(id, 2*time.Minute); m["state"] != "deleted" {
		t.Fatalf("delete ended %v", m)
	}
	for deadline := time.Now().Add(30 * time.Second); len(procsNaming("runsc", id)) > 0; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("runsc processes of the deleted sandbox left: %v", procsNaming("runsc", id))
		}
	}
}
