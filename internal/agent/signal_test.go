package agent_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/api/gen/process"
)

// TestSignalForwardsToEveryProcess: a signal pt-agent receives as init
// (SIGTERM when the sandbox stops) reaches every process it started, which
// can handle it, and Wait returns once they have ended.
func TestSignalForwardsToEveryProcess(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	const script = `trap 'echo got TERM; exit 3' TERM; echo ready; while :; do sleep 0.1; done`
	var streams []*connect.ServerStreamForClient[process.StartResponse]
	var evs []*events
	for i := 0; i < 2; i++ {
		stream, err := e.proc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: shell(script), Stdin: ptr(false)}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stream.Close() })
		ev := &events{}
		for !strings.Contains(ev.stdout.String(), "ready") && stream.Receive() {
			ev.add(stream.Msg().GetEvent())
		}
		if !strings.Contains(ev.stdout.String(), "ready") {
			t.Fatalf("process %d never got ready: %v", i, stream.Err())
		}
		streams, evs = append(streams, stream), append(evs, ev)
	}

	e.srv.Signal(unix.SIGTERM)
	// Wait returns when every process has ended; ctx's deadline only
	// keeps a broken relay from hanging the test (the reads below fail).
	e.srv.Wait(ctx.Done())

	for i, stream := range streams {
		if err := readEvents(evs[i], stream); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(evs[i].stdout.String(), "got TERM") || evs[i].end.GetExitCode() != 3 {
			t.Errorf("process %d: stdout %q end %v, want its TERM trap to run and exit 3", i, evs[i].stdout.String(), evs[i].end)
		}
	}
}
