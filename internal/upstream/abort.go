package upstream

import (
	"net"
	"strings"
	"sync"
)

// open holds every connection Dial made to a sandbox, by the sandbox's
// part of its pool name, so that Abort can end the calls in flight to one
// sandbox across every proxy of the process: a sandbox killed outright (a
// gVisor sandbox its host ended for memory) sends no FIN or RST, and a
// stream through a proxy would wait some 30 s for TCP keepalive.
var open = struct {
	sync.Mutex
	by map[string]map[*tracked]struct{}
}{by: map[string]map[*tracked]struct{}{}}

// sandboxKey is the part of a pool name (Host) that names the sandbox:
// its ID as the name writes it, without the boot.
func sandboxKey(id string) string { return strings.ToLower(strings.ReplaceAll(id, "_", "-")) }

// keyOf returns the sandbox part of a pool name's host, or "".
func keyOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !strings.HasSuffix(host, suffix) {
		return ""
	}
	_, rest, ok := strings.Cut(strings.TrimSuffix(host, suffix), ".")
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(rest, '-') // before the boot
	if i <= 0 {
		return ""
	}
	return rest[:i]
}

// track records c as a connection to the sandbox key names.
func track(key string, c net.Conn) net.Conn {
	if key == "" {
		return c
	}
	t := &tracked{Conn: c, key: key}
	open.Lock()
	defer open.Unlock()
	if open.by[key] == nil {
		open.by[key] = map[*tracked]struct{}{}
	}
	open.by[key][t] = struct{}{}
	return t
}

type tracked struct {
	net.Conn
	key string
}

func (t *tracked) Close() error {
	open.Lock()
	if m := open.by[t.key]; m != nil {
		delete(m, t)
		if len(m) == 0 {
			delete(open.by, t.key)
		}
	}
	open.Unlock()
	return t.Conn.Close()
}

// Abort closes every connection the process's proxies hold to the sandbox
// id, whatever its boot: their calls in flight end at once.
func Abort(id string) {
	key := sandboxKey(id)
	open.Lock()
	conns := open.by[key]
	delete(open.by, key)
	open.Unlock()
	for t := range conns {
		t.Conn.Close()
	}
}
