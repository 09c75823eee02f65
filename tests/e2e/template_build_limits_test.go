package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"testing"
)

// TestDockerfileBuildNetworkAndTimeout: a build's RUN steps get the
// network policy the request asks for (by default egress is allowed, as
// for sandboxes; with egress denied the same fetch fails the build) and a
// build past its timeout_seconds fails, naming the timeout, and makes no
// version. The server is in a namespace the test makes.
func TestDockerfileBuildNetworkAndTimeout(t *testing.T) {
	c := newClient(t)
	out := newOutside(t, 1)
	addr := out.Addrs[0].String()
	// netprobe prints "ok 200 BODY" or how the fetch failed (refused, …);
	// the RUN fails unless it fetched.
	// ADD unpacks the gzipped tar that carries it (the binary alone is
	// over this server's context limit).
	fetch := "FROM busybox\nADD netprobe.tar.gz /usr/local/bin/\n" +
		"RUN netprobe get http://" + addr + "/ > /fetched; cat /fetched; grep -q '^ok 200' /fetched\n"
	var tgz bytes.Buffer
	zw := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(zw)
	bin := netprobeBinary(t)
	tw.WriteHeader(&tar.Header{Name: "netprobe", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))})
	tw.Write(bin)
	tw.Close()
	zw.Close()
	upload := func() string {
		return c.upload("context", contextTar(map[string]string{"netprobe.tar.gz": tgz.String()}))
	}

	slug := c.slugFor("bnet")
	c.build(map[string]any{"slug": slug, "dockerfile": fetch, "context_upload_id": upload()})
	id := c.create(map[string]any{"template": slug})
	if got := c.mustSh(id, "cat /fetched"); got != "ok 200 hello "+addr+"\n" {
		t.Errorf("fetched during the build: %q", got)
	}

	denied := c.slugFor("bnetdeny")
	b := c.startBuild(map[string]any{"slug": denied, "dockerfile": fetch, "context_upload_id": upload(), "network": map[string]any{"egress": "deny"},
		// The network policy is not part of a step's cache key (as in
		// BuildKit): without no_cache the step would come from the build above.
		"no_cache": true})
	got, lg := c.followBuild(denied, b["id"].(string))
	f, _ := got["failure"].(map[string]any)
	if got["status"] != "failed" || f["line"] != float64(3) || f["exit_code"] != float64(1) || !strings.Contains(lg.String(), "refused") {
		t.Errorf("build with egress denied: %v\n%s", got, lg)
	}
	if r := c.do("GET", "/v1/templates/"+denied+"/versions", nil); r.Status != 404 {
		t.Errorf("the failed build made a version: %d %s", r.Status, r.Body)
	}

	slow := c.slugFor("btimeout")
	b = c.startBuild(map[string]any{"slug": slow, "dockerfile": "FROM busybox\nRUN sleep 120\n", "timeout_seconds": 3})
	got, lg = c.followBuild(slow, b["id"].(string))
	t.Logf("the build with a 3 s timeout ended after %s", lg.took)
	if got["status"] != "failed" || !strings.Contains(fmt.Sprint(got["error"]), "timeout of 3s") {
		t.Errorf("build past its timeout: %v\n%s", got, lg)
	}
	if r := c.do("GET", "/v1/templates/"+slow+"/versions", nil); r.Status != 404 {
		t.Errorf("the timed-out build made a version: %d %s", r.Status, r.Body)
	}
	// A timeout that is not a positive number is refused at once.
	if r := c.do("POST", "/v1/templates", map[string]any{"slug": slow, "dockerfile": "FROM busybox\n", "timeout_seconds": -1}); r.Status != 400 || r.JSON()["field"] != "timeout_seconds" {
		t.Errorf("timeout_seconds -1: %d %s", r.Status, r.Body)
	}
}
