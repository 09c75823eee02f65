package oci

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/runtimetest"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// TestExitReported: a container whose process is killed from outside (as
// the host's OOM killer, a crash or an operator would end it) is reported
// once, also by a Runtime that did not start it and was asked to watch
// it (ptd after a restart); a container the Runtime deletes or
// checkpoints itself is not.
func TestExitReported(t *testing.T) {
	for _, class := range []string{"runc", "gvisor"} {
		t.Run(class, func(t *testing.T) {
			var cfg Config
			if class == "gvisor" {
				testenv.RequiresRoot(t)
				testenv.RequiresCommand(t, "runsc")
				cfg = GVisorConfig(filepath.Join(t.TempDir(), "runsc-state"))
			} else {
				cfg = runcConfig(t)
			}
			open := func() (runtime.Runtime, *Runtime, <-chan Exit) {
				rt, err := NewRuntime(cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				r, ok := rt.(*Runtime)
				if cr, isCR := rt.(*CheckpointRuntime); isCR {
					r, ok = cr.Runtime, true
				}
				if !ok {
					t.Fatalf("NewRuntime returned a %T", rt)
				}
				exits := make(chan Exit, 8)
				r.OnExit(func(e Exit) { exits <- e })
				return rt, r, exits
			}
			rt, r, exits := open()
			start := func() *runtimetest.Container {
				return runtimetest.Start(t, r, runtimetest.NewSpec(t, "exec sleep 1000000"))
			}
			kill := func(c *runtimetest.Container) {
				if err := unix.Kill(c.State(t).Pid, unix.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			want := func(exits <-chan Exit, id string) {
				t.Helper()
				select {
				case e := <-exits:
					if e.ID != id {
						t.Fatalf("exit of %s reported, want %s", e.ID, id)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("no exit reported for %s", id)
				}
			}
			none := func(exits <-chan Exit, what string) {
				t.Helper()
				select {
				case e := <-exits:
					t.Fatalf("exit of %s reported after %s", e.ID, what)
				case <-time.After(time.Second):
				}
			}

			c := start()
			kill(c)
			want(exits, c.ID())
			none(exits, "one kill (reported twice)")

			c = start()
			if err := r.Delete(context.Background(), c.ID()); err != nil {
				t.Fatal(err)
			}
			none(exits, "a Delete")

			if cr, ok := rt.(runtime.Checkpointer); ok {
				c = start()
				if err := cr.Checkpoint(context.Background(), c.ID(), t.TempDir(), runtime.CheckpointOptions{}); err != nil {
					t.Fatal(err)
				}
				none(exits, "a checkpoint")
			}

			c = start()
			_, adopter, adopted := open()
			adopter.Watch(c.ID())
			kill(c)
			want(adopted, c.ID())
			want(exits, c.ID())
		})
	}
}
