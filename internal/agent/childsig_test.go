package agent_test

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/api/gen/process"
)

// TestChildSignalsDefault: an agent whose process started with SIGHUP and
// SIGINT ignored (under nohup, or as a script's background job, as these
// tests may be run) still starts processes with both at their defaults,
// so a hangup or an interrupt ends them. The agent runs in this
// test binary started again through `trap "" HUP INT; exec`, the way such
// a start passes the ignores on.
func TestChildSignalsDefault(t *testing.T) {
	if os.Getenv("PT_TEST_STARTED_IGNORING") != "1" {
		cmd := exec.Command("sh", "-c", `trap "" HUP INT; exec "$0" -test.run='^TestChildSignalsDefault$' -test.v`, os.Args[0])
		cmd.Env = append(os.Environ(), "PT_TEST_STARTED_IGNORING=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	for _, sig := range []os.Signal{unix.SIGHUP, unix.SIGINT} {
		if !signal.Ignored(sig) {
			t.Fatalf("%v is not ignored at the start: the test would prove nothing", sig)
		}
	}
	e := newEnv(t)
	ev, err := e.startAndCollect(testCtx(t), t, &process.StartRequest{Process: shell("grep SigIgn: /proc/self/status"), Stdin: ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(ev.stdout.String(), "SigIgn:")), 16, 64)
	if err != nil {
		t.Fatalf("%q: %v", ev.stdout.String(), err)
	}
	for _, sig := range []unix.Signal{unix.SIGHUP, unix.SIGINT} {
		if mask&(1<<(sig-1)) != 0 {
			t.Errorf("the agent's child ignores %v (SigIgn %016x)", sig, mask)
		}
	}
}
