package preview

import (
	"net"
	"strconv"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Label is the DNS label of a sandbox's port in the host form:
// "<port>-<sandbox id lowercased, without its underscore>". DNS names are
// case-insensitive and browsers lowercase them, so the ID's ULID is
// lowercased here and uppercased back when parsed.
func Label(sandboxID string, port int) string {
	return strconv.Itoa(port) + "-" + strings.ToLower(strings.Replace(sandboxID, "_", "", 1))
}

// target is where one preview request goes.
type target struct {
	SandboxID string
	Port      int
	// Prefix is the path form's "/<id>/<port>" (empty for the host
	// form): it is stripped before forwarding and scopes the cookie.
	Prefix string
}

// parseHost routes by Host: "<port>-<id>.<domain>[:port]".
func parseHost(host, domain string) (target, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok := strings.CutSuffix(host, "."+strings.ToLower(domain))
	if !ok || strings.Contains(label, ".") {
		return target{}, false
	}
	ps, rest, ok := strings.Cut(label, "-")
	if !ok {
		return target{}, false
	}
	port, ok := parsePort(ps)
	if !ok {
		return target{}, false
	}
	prefix := strings.TrimSuffix(sandbox.PrefixSandbox, "_")
	ulid, ok := strings.CutPrefix(rest, prefix)
	if !ok {
		return target{}, false
	}
	id := sandbox.PrefixSandbox + strings.ToUpper(ulid)
	if !sandbox.ValidID(sandbox.PrefixSandbox, id) {
		return target{}, false
	}
	return target{SandboxID: id, Port: port}, true
}

// parsePath routes by path: "/<sandbox id>/<port>[/rest]". It returns the
// path to forward ("/rest", at least "/").
func parsePath(path string) (target, string, bool) {
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		return target{}, "", false
	}
	id, rest, _ := strings.Cut(rest, "/")
	ps, rest, slash := strings.Cut(rest, "/")
	if !sandbox.ValidID(sandbox.PrefixSandbox, id) {
		return target{}, "", false
	}
	port, ok := parsePort(ps)
	if !ok {
		return target{}, "", false
	}
	fwd := "/"
	if slash {
		fwd = "/" + rest
	}
	return target{SandboxID: id, Port: port, Prefix: "/" + id + "/" + ps}, fwd, true
}

func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < sandbox.MinPreviewPort || n > sandbox.MaxPreviewPort {
		return 0, false
	}
	return n, true
}
