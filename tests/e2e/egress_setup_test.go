package e2e

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/platinum-dev/platinum/internal/egress"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// egressFixture is what ptd is started with for the egress tests: a root
// CA of the tests' own that ptd's egress proxy trusts for upstream TLS
// (verification stays on), and a hosts file through which names resolve
// to addresses in network namespaces the tests create.
var egressFixture struct {
	dir, caFile, hostsFile string
	ca                     *egress.CA
	mu                     sync.Mutex // guards the hosts file
}

// egressArgs prepares the fixture and returns ptd's flags for it.
func egressArgs() []string {
	dir, err := os.MkdirTemp("", "pt-e2e-egress-")
	if err != nil {
		panic(err)
	}
	ca, _, err := egress.NewCA("e2e upstream root")
	if err != nil {
		panic(err)
	}
	egressFixture.dir, egressFixture.ca = dir, ca
	egressFixture.caFile = filepath.Join(dir, "upstream-ca.pem")
	egressFixture.hostsFile = filepath.Join(dir, "hosts")
	os.WriteFile(egressFixture.caFile, ca.CertPEM, 0o644)
	os.WriteFile(egressFixture.hostsFile, nil, 0o644)
	return []string{"--egress-upstream-ca", egressFixture.caFile, "--egress-hosts", egressFixture.hostsFile}
}

// egressCleanup removes the fixture's files.
func egressCleanup() {
	if egressFixture.dir != "" {
		os.RemoveAll(egressFixture.dir)
	}
}

// mapHosts adds "addr name" lines to ptd's hosts file until the test ends.
func mapHosts(t *testing.T, addr netip.Addr, names ...string) {
	t.Helper()
	line := addr.String() + " " + strings.Join(names, " ") + "\n"
	egressFixture.mu.Lock()
	defer egressFixture.mu.Unlock()
	f, err := os.OpenFile(egressFixture.hostsFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(line)
	f.Close()
	t.Cleanup(func() {
		egressFixture.mu.Lock()
		defer egressFixture.mu.Unlock()
		b, _ := os.ReadFile(egressFixture.hostsFile)
		os.WriteFile(egressFixture.hostsFile, bytes.Replace(b, []byte(line), nil, 1), 0o644)
	})
}

// outside is "the internet" for a test (ptdtest.Outside) whose addresses
// each serve a TCP banner (port 9000), HTTP (80) and HTTPS (443,
// certificates from the fixture's CA for whatever SNI is asked). Sandbox
// egress is NATed to the host's end, so replies find their way.
type outside struct {
	*ptdtest.Outside

	mu   sync.Mutex
	reqs []seenRequest
}

// seenRequest is what an outside server received.
type seenRequest struct {
	TLS    bool
	Host   string
	Header http.Header
	Body   string
}

// newOutside builds the namespace with n server addresses; everything is
// removed when the test ends.
func newOutside(t *testing.T, n int) *outside {
	t.Helper()
	requireEnv(t)
	o := &outside{Outside: ptdtest.NewOutside(t, "pto", n)}
	o.Serve(t, "0.0.0.0:9000", func(c net.Conn) { fmt.Fprintf(c, "hi %s\n", strings.Split(c.LocalAddr().String(), ":")[0]) })
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		o.mu.Lock()
		o.reqs = append(o.reqs, seenRequest{TLS: req.TLS != nil, Host: req.Host, Header: req.Header.Clone(), Body: string(b)})
		o.mu.Unlock()
		fmt.Fprintf(w, "hello %s", req.Host)
	})
	for _, ln := range []net.Listener{
		o.Listen(t, "0.0.0.0:80"),
		tls.NewListener(o.Listen(t, "0.0.0.0:443"), &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return egressFixture.ca.Leaf(hi.ServerName)
		}}),
	} {
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	return o
}

// requests returns what the outside servers received so far.
func (o *outside) requests() []seenRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]seenRequest(nil), o.reqs...)
}

var netprobeBuild struct {
	once sync.Once
	path string
	err  error
}

// installNetprobe copies the netprobe helper (testdata/netprobe, a static
// binary) into the sandbox at /usr/local/bin/netprobe.
func installNetprobe(t *testing.T, c *client, id string) {
	t.Helper()
	b := netprobeBinary(t)
	if r := c.do("PUT", "/v1/sandboxes/"+id+"/files?path=/usr/local/bin/netprobe", b); r.Status/100 != 2 {
		t.Fatalf("upload netprobe: %d %s", r.Status, r.Body)
	}
	c.mustSh(id, "chmod 755 /usr/local/bin/netprobe")
}

// netprobeBinary builds testdata/netprobe once and returns it.
func netprobeBinary(t *testing.T) []byte {
	t.Helper()
	netprobeBuild.once.Do(func() {
		netprobeBuild.path = filepath.Join(env.binDir, "netprobe")
		cmd := exec.Command("go", "build", "-o", netprobeBuild.path, "./testdata/netprobe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			netprobeBuild.err = fmt.Errorf("build netprobe: %v: %s", err, out)
		}
	})
	if netprobeBuild.err != nil {
		t.Fatal(netprobeBuild.err)
	}
	b, err := os.ReadFile(netprobeBuild.path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// probe runs netprobe in the sandbox and returns its one-line verdict.
func probe(t *testing.T, c *client, id string, args ...string) string {
	t.Helper()
	res := c.sh(id, "SSL_CERT_FILE=${SSL_CERT_FILE:-/tmp/upstream-ca.pem} netprobe "+strings.Join(args, " "))
	return strings.TrimSpace(res.Stdout + res.Stderr)
}
