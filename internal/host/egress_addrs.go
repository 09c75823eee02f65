package host

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// localAddrs caches this machine's addresses briefly: the egress proxy
// checks every connection against them, and listing them is a netlink dump.
var localAddrs struct {
	sync.Mutex
	at    time.Time
	addrs map[netip.Addr]bool
	err   error
}

// isLocalAddr reports whether a is one of this machine's addresses (true
// when they cannot be listed: the proxy then refuses).
func isLocalAddr(a netip.Addr) bool {
	localAddrs.Lock()
	defer localAddrs.Unlock()
	if time.Since(localAddrs.at) > 2*time.Second {
		localAddrs.addrs, localAddrs.err = listLocalAddrs()
		localAddrs.at = time.Now()
	}
	return localAddrs.err != nil || localAddrs.addrs[a]
}

func listLocalAddrs() (map[netip.Addr]bool, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out[ip.Unmap()] = true
			}
		}
	}
	return out, nil
}
