package remote

import (
	"fmt"
	"testing"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// BenchmarkListSandboxes50 measures a page of 50 sandboxes read through
// a Client (loopback HTTP, the codec both ways) and straight from the
// SQLite store behind it, in one run.
func BenchmarkListSandboxes50(b *testing.B) {
	for _, via := range []string{"local", "remote"} {
		b.Run(via, func(b *testing.B) {
			st := openSQLiteB(b)
			var s store.Store = st
			if via == "remote" {
				s = dialB(b, serveB(b, st))
			}
			ctx := b.Context()
			for i := range 50 {
				sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: "org_b", State: sandbox.StateRunning, Template: "busybox",
					Env: map[string]string{"A": fmt.Sprint(i)}, Metadata: map[string]string{"k": "v"}}
				if err := s.CreateSandbox(ctx, sb); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if _, _, err := s.ListSandboxes(ctx, store.ListOptions{OrgID: "org_b", Limit: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
