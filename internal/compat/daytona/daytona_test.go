package daytona

import "testing"

// TestPoolHost: the toolbox proxy's connection pools are one per sandbox
// and address, so a connection kept to one sandbox's agent is never sent
// to another that got its address later; the name dials that address.
func TestPoolHost(t *testing.T) {
	a := poolHost("sbx_01ABC", "100.71.160.7:49983")
	b := poolHost("sbx_01DEF", "100.71.160.7:49983")
	c := poolHost("sbx_01ABC", "100.71.160.8:49983")
	if a == b || a == c || b == c {
		t.Fatalf("pools shared: %s %s %s", a, b, c)
	}
	for _, c := range []struct{ in, want string }{
		{a, "100.71.160.7:49983"},
		{c, "100.71.160.8:49983"},
		{poolHost("sbx_1", "[fd00::5]:49983"), "[fd00::5]:49983"},
		{"10.0.0.1:80", "10.0.0.1:80"},
	} {
		if got, err := agentAddr(c.in); err != nil || got != c.want {
			t.Errorf("agentAddr(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := agentAddr("azz.sbx-1.agent:1"); err == nil {
		t.Errorf("a malformed pool name was dialled")
	}
}
