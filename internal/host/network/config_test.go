package network

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		field  string // "" = valid
	}{
		{"default", func(*Config) {}, ""},
		{"small subnet", func(c *Config) { c.Subnet = netip.MustParsePrefix("100.127.3.0/30") }, ""},
		{"empty bridge", func(c *Config) { c.Bridge = "" }, "Bridge"},
		{"long bridge", func(c *Config) { c.Bridge = "abcdefghijklmnop" }, "Bridge"},
		{"bridge with slash", func(c *Config) { c.Bridge = "a/b" }, "Bridge"},
		{"bridge with space", func(c *Config) { c.Bridge = "a b" }, "Bridge"},
		{"no subnet", func(c *Config) { c.Subnet = netip.Prefix{} }, "Subnet"},
		{"ipv6 subnet", func(c *Config) { c.Subnet = netip.MustParsePrefix("fd00::/64") }, "Subnet"},
		{"host bits", func(c *Config) { c.Subnet = netip.MustParsePrefix("100.96.0.1/16") }, "Subnet"},
		{"too small", func(c *Config) { c.Subnet = netip.MustParsePrefix("100.96.0.0/31") }, "Subnet"},
		{"empty prefix", func(c *Config) { c.NetNSPrefix = "" }, "NetNSPrefix"},
		{"prefix with slash", func(c *Config) { c.NetNSPrefix = "a/" }, "NetNSPrefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.modify(&c)
			err := c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("Validate() = %v, want ConfigError on %s", err, tt.field)
			}
			if !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Errorf("Validate() = %v, want it to wrap ErrInvalidArgument", err)
			}
		})
	}
}

func TestLastAddr(t *testing.T) {
	tests := []struct{ prefix, want string }{
		{"100.96.0.0/16", "100.96.255.255"},
		{"100.127.3.0/24", "100.127.3.255"},
		{"100.127.3.4/30", "100.127.3.7"},
		{"100.64.0.0/10", "100.127.255.255"},
	}
	for _, tt := range tests {
		if got := lastAddr(netip.MustParsePrefix(tt.prefix)); got.String() != tt.want {
			t.Errorf("lastAddr(%s) = %v, want %s", tt.prefix, got, tt.want)
		}
	}
}

func TestReserveLowestFree(t *testing.T) {
	c := DefaultConfig()
	c.Subnet = netip.MustParsePrefix("100.127.3.0/29") // .1 gateway, .2-.6 sandboxes, .7 broadcast
	m, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range 5 {
		a, err := m.reserve(string(rune('a' + i)))
		if err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
		got = append(got, a.String())
	}
	want := []string{"100.127.3.2", "100.127.3.3", "100.127.3.4", "100.127.3.5", "100.127.3.6"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("reserved %v, want %v", got, want)
		}
	}
	if _, err := m.reserve("f"); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("reserve on a full pool = %v, want ErrUnavailable", err)
	}
	m.release("c", netip.MustParseAddr("100.127.3.4"))
	if a, err := m.reserve("g"); err != nil || a.String() != "100.127.3.4" {
		t.Fatalf("reserve after release = %v, %v; want 100.127.3.4", a, err)
	}
}

// TestReserveBridgePorts: a subnet larger than a bridge's ports (the
// default /16) still reserves no more addresses than the bridge has ports,
// and the next attach is told the host is full (ErrUnavailable) before any
// veth is made, rather than failing in the kernel (EXFULL).
func TestReserveBridgePorts(t *testing.T) {
	c := DefaultConfig()
	c.Subnet = netip.MustParsePrefix("100.127.0.0/16")
	m, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.maxPorts != 1023 {
		t.Fatalf("maxPorts = %d, want 1023 (the kernel's BR_MAX_PORTS less port 0)", m.maxPorts)
	}
	m.maxPorts = 3
	for i := range 3 {
		if _, err := m.reserve(string(rune('a' + i))); err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
	}
	if _, err := m.reserve("d"); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("reserve past the bridge's ports = %v, want ErrUnavailable", err)
	}
	m.release("b", netip.MustParseAddr("100.127.0.3"))
	if a, err := m.reserve("e"); err != nil || a.String() != "100.127.0.3" {
		t.Fatalf("reserve after release = %v, %v; want 100.127.0.3", a, err)
	}
}

func TestNames(t *testing.T) {
	m, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ns1, v1 := m.names("sbx_01KABCDEF")
	ns2, v2 := m.names("sbx_01KABCDEF")
	ns3, v3 := m.names("sbx_01KABCDEG")
	if ns1 != ns2 || v1 != v2 {
		t.Errorf("names not stable: %s/%s vs %s/%s", ns1, v1, ns2, v2)
	}
	if ns1 == ns3 || v1 == v3 {
		t.Errorf("different ids share names: %s/%s", ns1, v1)
	}
	if len(v1) != maxIfName {
		t.Errorf("veth name %q is %d bytes, want %d", v1, len(v1), maxIfName)
	}
	if len(ns1) != len("pt-")+hashLen {
		t.Errorf("netns name %q has unexpected length", ns1)
	}
}
