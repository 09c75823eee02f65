package network

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Config describes one host's sandbox network. A host normally has exactly
// one; tests run several side by side, each with its own bridge, subnet and
// namespace prefix.
type Config struct {
	// Bridge is the host bridge every sandbox veth joins. Its name also
	// names our iptables chains (PT-<Bridge>-IN, -FWD, -NAT), so two
	// managers with different bridges never touch each other's rules.
	Bridge string
	// Subnet is the sandbox address pool. Its first address is the gateway
	// and lives on the bridge; the rest (minus broadcast) go to sandboxes.
	Subnet netip.Prefix
	// NetNSPrefix starts the name of every sandbox network namespace under
	// /run/netns. Recover finds our namespaces after a restart by it.
	NetNSPrefix string
	// Egress allows sandboxes to open connections to the outside world
	// (forwarding + masquerade). When false, forwarded traffic from the
	// bridge is dropped; the host can still reach the sandboxes.
	Egress bool
	// GatewayPorts are TCP ports on the gateway address that sandboxes may
	// open (ptd's API proxy for sandbox-scoped tokens); every other host
	// port stays closed to them.
	GatewayPorts []uint16
	// ProxyPort and DNSPort are where the host's egress proxy and
	// filtering DNS resolver listen on the gateway (0: none). Sandboxes
	// reach them only through the redirects of their Policy, never by
	// connecting to them directly.
	ProxyPort, DNSPort uint16
}

// DefaultConfig returns the production defaults: bridge "pt0", subnet
// 100.96.0.0/16 (inside the 100.64.0.0/10 shared address space, which is
// unlikely to clash with a host's LAN), namespaces "pt-…", egress allowed.
func DefaultConfig() Config {
	return Config{
		Bridge:      "pt0",
		Subnet:      netip.MustParsePrefix("100.96.0.0/16"),
		NetNSPrefix: "pt-",
		Egress:      true,
	}
}

// ConfigError reports which Config field is invalid. It wraps
// sandbox.ErrInvalidArgument so callers can match the category.
type ConfigError struct {
	Field string
	Err   error
}

// Error implements error.
func (e *ConfigError) Error() string { return fmt.Sprintf("network config: %s: %v", e.Field, e.Err) }

// Unwrap returns the underlying error (which wraps sandbox.ErrInvalidArgument).
func (e *ConfigError) Unwrap() error { return e.Err }

// maxIfName is IFNAMSIZ-1: the longest interface name Linux accepts.
const maxIfName = 15

// Validate checks c and returns a *ConfigError for the first bad field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Err: fmt.Errorf(format+": %w", append(args, sandbox.ErrInvalidArgument)...)}
	}
	if err := validIfName(c.Bridge); err != nil {
		return bad("Bridge", "%q: %v", c.Bridge, err)
	}
	if !c.Subnet.IsValid() || !c.Subnet.Addr().Is4() {
		return bad("Subnet", "%v: want an IPv4 prefix", c.Subnet)
	}
	if c.Subnet != c.Subnet.Masked() {
		return bad("Subnet", "%v: host bits set (want %v)", c.Subnet, c.Subnet.Masked())
	}
	if c.Subnet.Bits() > 30 {
		return bad("Subnet", "%v: too small (need at least /30: gateway + one sandbox)", c.Subnet)
	}
	if c.NetNSPrefix == "" || strings.ContainsAny(c.NetNSPrefix, "/\x00") || c.NetNSPrefix == "." || c.NetNSPrefix == ".." {
		return bad("NetNSPrefix", "%q: want a non-empty file name prefix", c.NetNSPrefix)
	}
	if len(c.NetNSPrefix) > 200 {
		return bad("NetNSPrefix", "too long (%d bytes)", len(c.NetNSPrefix))
	}
	return nil
}

func validIfName(name string) error {
	if name == "" {
		return errors.New("empty")
	}
	if len(name) > maxIfName {
		return fmt.Errorf("longer than %d bytes", maxIfName)
	}
	if name == "." || name == ".." {
		return errors.New("reserved name")
	}
	for _, r := range name {
		if r <= ' ' || r >= 0x7f || r == '/' || r == ':' || r == '%' {
			return fmt.Errorf("bad character %q", r)
		}
	}
	return nil
}

// gateway returns the subnet's first address, which sits on the bridge.
func (c Config) gateway() netip.Addr { return c.Subnet.Addr().Next() }
