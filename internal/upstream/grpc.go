package upstream

import (
	"net/http"
	"strings"
)

// ByProtocol sends a gRPC call that arrived over HTTP/2 on H2 (a transport
// speaking h2c) and every other request on H1. gRPC needs HTTP/2 end to
// end (trailers, streams both ways); everything else goes over HTTP/1.1,
// which every server speaks. Proxies to sandboxes use it, and so does the
// relay between ptds, so a gRPC preview of a sandbox on another host stays
// HTTP/2 on every hop (docs/ARCHITECTURE.md, "Preview proxy").
type ByProtocol struct{ H1, H2 http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t ByProtocol) RoundTrip(r *http.Request) (*http.Response, error) {
	if IsGRPC(r) {
		return t.H2.RoundTrip(r)
	}
	return t.H1.RoundTrip(r)
}

// IsGRPC reports whether r is a gRPC call made over HTTP/2.
func IsGRPC(r *http.Request) bool {
	return r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

// H2C sets tr to speak HTTP/2 with prior knowledge over plain TCP (h2c)
// and returns it.
func H2C(tr *http.Transport) *http.Transport {
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return tr
}
