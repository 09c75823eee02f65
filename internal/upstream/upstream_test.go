package upstream

import (
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestHost: pools are one per sandbox, boot and address, so a connection
// kept to one sandbox is never sent to another that got its address
// later, nor to the same sandbox after it started again; the name dials
// that address.
func TestHost(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	abc := sandbox.Sandbox{ID: "sbx_01ABC", CreatedAt: t0}
	restarted := abc
	restarted.LastStart = &sandbox.LastStart{At: t0.Add(time.Minute)}
	a := Host(abc, "100.71.160.7:49983")
	names := []string{a,
		Host(sandbox.Sandbox{ID: "sbx_01DEF", CreatedAt: t0}, "100.71.160.7:49983"),
		Host(abc, "100.71.160.8:49983"),
		Host(restarted, "100.71.160.7:49983"),
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Fatalf("pools shared: %v", names)
		}
		seen[n] = true
	}
	for _, c := range []struct{ in, want string }{
		{a, "100.71.160.7:49983"},
		{names[3], "100.71.160.7:49983"},
		{Host(abc, "[fd00::5]:49983"), "[fd00::5]:49983"},
		{"10.0.0.1:80", "10.0.0.1:80"},
	} {
		if got, err := Addr(c.in); err != nil || got != c.want {
			t.Errorf("Addr(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := Addr("azz.sbx-1-0.sandbox:1"); err == nil {
		t.Errorf("a malformed pool name was dialled")
	}
}
