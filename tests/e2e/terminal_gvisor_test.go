package e2e

import (
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestTerminalsAcrossGVisorStopStart: a gVisor sandbox's stop keeps its
// memory, so a process started from an SSH session lives on across a stop
// and a start with its state: the SSH and PTY clients reconnect (the SSH
// login itself resumes the sandbox) and find it running where it was.
// Terminals open during a memory snapshot go on; those open during the
// stop end, and their shells are hung up at the next start.
func TestTerminalsAcrossGVisorStopStart(t *testing.T) {
	requireSSH(t)
	c := newClient(t)
	key, pub := sshKey(t, "gvisor")
	id := c.create(map[string]any{"template": "busybox", "runtime": "gvisor", "ssh_keys": []string{pub}})
	bearer := http.Header{"Authorization": {"Bearer " + env.token}}

	// A counter whose value lives only in the process's memory: after a
	// cold boot it would be gone, after a restore it continues. It renames
	// each value into place, so a read never sees the file emptied for the
	// next write.
	out, errOut, code := sshRun(t, key, id, "",
		`setsid sh -c 'n=0; while :; do n=$((n+1)); echo $n > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done' </dev/null >/dev/null 2>&1 & echo $!`)
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if code != 0 || err != nil {
		t.Fatalf("start the counter: %d %q %q", code, out, errOut)
	}
	count := func(via string) int {
		t.Helper()
		var o, e string
		var rc int
		script := "kill -0 " + strconv.Itoa(pid) + " && cat /tmp/count"
		if via == "ssh" {
			o, e, rc = sshRun(t, key, id, "", script)
		} else {
			p, _, err := dialPTY(t, id, &websocket.DialOptions{HTTPHeader: bearer})
			if err != nil {
				t.Fatalf("reconnect the PTY WebSocket: %v", err)
			}
			p.control(map[string]any{"type": "start", "cmd": script})
			ce := p.closeStatus()
			o, e = strings.ReplaceAll(p.out.String(), "\r\n", "\n"), ce.Reason
			if ce.Reason != "exit 0" {
				rc = 1
			}
		}
		n, err := strconv.Atoi(strings.TrimSpace(o))
		if rc != 0 || err != nil {
			t.Fatalf("counter via %s: pid %d gone or no count: %d %q %q", via, pid, rc, o, e)
		}
		return n
	}
	waitAbove := func(via string, min int) int {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			n := count(via)
			if n > min || time.Now().After(deadline) {
				return n
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	before := waitAbove("ssh", 5)

	// Clients connected during the stop: an interactive SSH shell and a
	// PTY WebSocket shell.
	host, port, _ := net.SplitHostPort(env.sshAddr)
	sshTerm := startTTY(t, exec.Command("ssh", append(append([]string{"-p", port}, sshOpts(key)...), "-t", id+"@"+host)...), 24, 80)
	sshTerm.send("echo ssh-$((1+1))\n")
	sshTerm.waitFor("ssh-2")
	ws, _, err := dialPTY(t, id, &websocket.DialOptions{HTTPHeader: bearer})
	if err != nil {
		t.Fatal(err)
	}
	ws.control(map[string]any{"type": "start"})
	ws.send("echo ws-$((2+2))\n")
	ws.until("ws-4")

	// A memory snapshot resets the sandbox's connections too: both
	// sessions reattach and go on, with their shells' state.
	sshTerm.send("X=kept-$((5+5)); echo set-X\n")
	sshTerm.waitFor("\r\nset-X")
	ws.send("Y=kept-$((6+6)); echo set-Y\n")
	ws.until("\r\nset-Y")
	if snap := c.snapshot(id, map[string]any{"memory": true}); snap["memory"] != true {
		t.Fatalf("snapshot: %v", snap)
	}
	sshTerm.send("echo ssh-$X\n")
	sshTerm.waitFor("ssh-kept-10")
	ws.send("echo ws-$Y\n")
	ws.until("ws-kept-12")

	// The two terminals' shells, by their tags.
	terminals := map[int]any{}
	for pid, tag := range listPIDs(t, c, id) {
		if s, _ := tag.(string); strings.HasPrefix(s, "terminal-") {
			terminals[pid] = tag
		}
	}
	if len(terminals) != 2 {
		t.Fatalf("terminal processes %v, want the SSH and the PTY shells", terminals)
	}

	stop(t, c, id)
	if code := sshTerm.wait(); code != 255 || !strings.Contains(sshTerm.out.String(), "the sandbox is stopped; the session ended") {
		t.Errorf("ssh across the stop exited %d, want 255 and why; terminal %q", code, sshTerm.out.String())
	}
	if ce := ws.closeStatus(); ce.Code != 4409 || !strings.Contains(ce.Reason, "stopped") {
		t.Errorf("the PTY WebSocket closed %d %q across the stop, want 4409 and the state", ce.Code, ce.Reason)
	}

	// The SSH login starts the sandbox again (auto_resume), from memory.
	after := count("ssh")
	if after < before {
		t.Fatalf("counter after the resume: %d, below %d before the stop: the process restarted", after, before)
	}
	if r := c.do("GET", "/v1/sandboxes/"+id, nil); r.JSON()["state"] != "running" || r.JSON()["restore"] != "memory" {
		t.Fatalf("after the SSH login: %s", r.Body)
	}
	if n := waitAbove("ssh", after); n <= after {
		t.Fatalf("the counter does not advance after the resume: %d", n)
	}
	// The shells whose clients the stop took away are hung up once the
	// sandbox runs again, as when a terminal closes; nothing else is.
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := []int{}
		now := listPIDs(t, c, id)
		for pid, tag := range terminals {
			if now[pid] == tag {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("terminal shells %v outlived their clients across the stop: %v", left, now)
		}
		time.Sleep(300 * time.Millisecond)
	}

	// Stop and start by the API, then the PTY WebSocket reconnects.
	before = count("pty")
	stop(t, c, id)
	if r := c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running&wait_timeout_ms=120000", nil); r.Status != 200 || r.JSON()["restore"] != "memory" {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	after = count("pty")
	if after < before {
		t.Fatalf("counter after the start: %d, below %d before the stop", after, before)
	}
	if n := waitAbove("pty", after); n <= after {
		t.Fatalf("the counter does not advance after the start: %d", n)
	}
	// And an interactive SSH shell works again.
	t2 := startTTY(t, exec.Command("ssh", append(append([]string{"-p", port}, sshOpts(key)...), "-t", id+"@"+host)...), 24, 80)
	t2.send("echo again-$((3+3)); exit 7\n")
	t2.waitFor("again-6")
	if code := t2.wait(); code != 7 {
		t.Errorf("ssh after the start exited %d, want 7", code)
	}
}
