package faults

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/platinum-dev/platinum/internal/objstore/s3/s3test"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// faultProxy is a fault-injecting TCP proxy on loopback (toxiproxy, as a
// library) in front of the S3-compatible test server: ptd's object store
// is its address.
type faultProxy struct {
	t *testing.T
	p *toxiproxy.Proxy
}

func newFaultProxy(t *testing.T, upstream string) *faultProxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "s3", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return &faultProxy{t: t, p: p}
}

// addr is where the proxy listens.
func (f *faultProxy) addr() string { return f.p.Listen }

// toxic adds a toxic of typ on the stream ("upstream": what ptd sends,
// "downstream": what it receives).
func (f *faultProxy) toxic(typ, stream string, attrs string) {
	f.t.Helper()
	js := fmt.Sprintf(`{"name":"%s_%s","type":"%s","stream":"%s","toxicity":1,"attributes":%s}`, typ, stream, typ, stream, attrs)
	if _, err := f.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		f.t.Fatal(err)
	}
}

// heal removes every toxic and makes sure the proxy accepts connections.
func (f *faultProxy) heal() {
	f.p.Toxics.ResetToxics(context.Background())
	if !f.p.Enabled {
		if err := f.p.Start(); err != nil {
			f.t.Fatal(err)
		}
	}
}

// fault is one way the object store misbehaves.
type fault struct {
	name string
	// fails says whether an operation under the fault must fail (it
	// completes, only slower, when false).
	fails bool
	apply func(f *faultProxy)
}

var faults = []fault{
	// Nothing listens: every connection is refused.
	{"refused", true, func(f *faultProxy) { f.p.Stop() }},
	// Each connection is closed after 256 KiB of what ptd sends, in the
	// middle of an upload.
	{"dropped", true, func(f *faultProxy) { f.toxic("limit_data", "upstream", `{"bytes":262144}`) }},
	// Each connection is reset 200 ms after it opens.
	{"reset", true, func(f *faultProxy) { f.toxic("reset_peer", "upstream", `{"timeout":200}`) }},
	// 100 ms more each way and 2 MB/s up: slow, but it works.
	{"slow", false, func(f *faultProxy) {
		f.toxic("latency", "downstream", `{"latency":100,"jitter":20}`)
		f.toxic("bandwidth", "upstream", `{"rate":2048}`)
	}},
}

// objectStoreDaemon starts an S3-compatible server, the fault proxy in
// front of it and a ptd whose object store (archives, backups, workspaces,
// artifacts) is the proxy.
func objectStoreDaemon(t *testing.T, extra ...string) (*ptdtest.Daemon, *faultProxy) {
	t.Helper()
	cfg := s3test.Start(t)
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	fp := newFaultProxy(t, u.Host)
	d := startPtd(t, ptdtest.Options{
		ExtraArgs: append([]string{"--s3-endpoint", "http://" + fp.addr()}, extra...),
		Env:       []string{"PT_S3_ACCESS_KEY=" + cfg.AccessKey, "PT_S3_SECRET_KEY=" + cfg.SecretKey},
	})
	return d, fp
}

// fill writes 8 MiB of random bytes (incompressible, so they are sent)
// to path in the sandbox and returns their SHA-256.
func fill(a *api, id, path string) string {
	a.t.Helper()
	return strings.Fields(a.sh(id, "head -c 8388608 /dev/urandom > "+path+" && sync && sha256sum "+path))[0]
}

func sum(a *api, id, path string) string {
	a.t.Helper()
	return strings.Fields(a.sh(id, "sha256sum "+path))[0]
}

// TestArchiveUnderObjectStoreFaults: an archive whose object store
// refuses, drops or resets its connections fails cleanly (the sandbox is
// back to stopped with the reason, its local disk intact: it starts with
// its data) and succeeds once the store is back; a slow store only makes
// it slower. Either way the archived sandbox starts with its data.
func TestArchiveUnderObjectStoreFaults(t *testing.T) {
	d, fp := objectStoreDaemon(t)
	a := apiOf(t, d)
	for _, class := range []string{"runc", "gvisor"} {
		for _, f := range faults {
			t.Run(class+"/"+f.name, func(t *testing.T) {
				a := &api{t: t, url: a.url, token: a.token}
				id := a.create(class, nil)
				want := fill(a, id, "/root/data")
				a.stop(id)
				f.apply(fp)
				if code, _, b := a.do("POST", "/v1/sandboxes/"+id+"/archive", nil); code != 200 && code != 202 {
					fp.heal()
					t.Fatalf("archive: %d %s", code, b)
				}
				m := a.settle(id, 5*time.Minute)
				fp.heal()
				if f.fails {
					reason, _ := m["reason"].(string)
					if m["state"] != "stopped" || !strings.Contains(reason, "archive failed") {
						t.Fatalf("archive under %s ended %v %q, want stopped with the failure", f.name, m["state"], reason)
					}
					// The local disk is intact: the sandbox starts with its data.
					a.start(id)
					if got := sum(a, id, "/root/data"); got != want {
						t.Fatalf("after a failed archive the data reads %s, want %s", got, want)
					}
					a.stop(id)
					if code, _, b := a.do("POST", "/v1/sandboxes/"+id+"/archive", nil); code != 200 && code != 202 {
						t.Fatalf("archive again: %d %s", code, b)
					}
					m = a.settle(id, 5*time.Minute)
				}
				if m["state"] != "archived" {
					t.Fatalf("archive ended %v, want archived", m)
				}
				a.start(id) // restores the disk from the object store
				if got := sum(a, id, "/root/data"); got != want {
					t.Fatalf("the archived sandbox's data reads %s, want %s", got, want)
				}
				a.do("DELETE", "/v1/sandboxes/"+id, nil)
			})
		}
	}
}

// TestBackupUnderObjectStoreFaults: a backup whose object store refuses,
// drops or resets its connections ends failed with a reason, leaves no
// manifest, and the sandbox runs on untouched; once the store is back a
// backup is ready. A slow store only makes it slower.
func TestBackupUnderObjectStoreFaults(t *testing.T) {
	d, fp := objectStoreDaemon(t)
	a := apiOf(t, d)
	id := a.create("runc", nil)
	backup := func(t *testing.T, a *api) map[string]any {
		t.Helper()
		code, m, b := a.do("POST", "/v1/sandboxes/"+id+"/backups", map[string]any{})
		if code != 202 {
			t.Fatalf("backup: %d %s", code, b)
		}
		snap := m["id"].(string)
		for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
			_, m, _ = a.do("GET", "/v1/snapshots/"+snap, nil)
			if m["state"] != "creating" || time.Now().After(deadline) {
				return m
			}
		}
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			a := &api{t: t, url: a.url, token: a.token}
			// New data each time: chunks already in the store from an
			// earlier backup are not sent again.
			want := fill(a, id, "/root/data")
			f.apply(fp)
			m := backup(t, a)
			fp.heal()
			if f.fails {
				if m["state"] != "failed" || m["reason"] == "" || m["complete"] != false {
					t.Fatalf("backup under %s: %v, want failed with a reason and not complete", f.name, m)
				}
				if sb := a.get(id); sb["state"] != "running" {
					t.Fatalf("the sandbox after a failed backup: %v", sb)
				}
				if got := sum(a, id, "/root/data"); got != want {
					t.Fatalf("after a failed backup the data reads %s, want %s", got, want)
				}
				m = backup(t, a)
			}
			if m["state"] != "ready" || m["complete"] != true {
				t.Fatalf("backup: %v, want ready and complete", m)
			}
		})
	}
}

// TestArtifactUnderObjectStoreFaults: an export whose object store
// refuses, drops or resets its connections answers 503 and records no
// artifact; once the store is back the same export is made, byte for
// byte. A slow store only makes it slower.
func TestArtifactUnderObjectStoreFaults(t *testing.T) {
	d, fp := objectStoreDaemon(t)
	a := apiOf(t, d)
	id := a.create("runc", nil)
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			a := &api{t: t, url: a.url, token: a.token}
			want := fill(a, id, "/root/data")
			_, before, _ := a.do("GET", "/v1/artifacts?sandbox_id="+id, nil)
			f.apply(fp)
			code, m, b := a.do("POST", "/v1/sandboxes/"+id+"/artifacts", map[string]any{"path": "/root/data"})
			fp.heal()
			if f.fails {
				if code != 503 || m["code"] == nil {
					t.Fatalf("export under %s: %d %s, want 503 with a code", f.name, code, b)
				}
				if _, after, _ := a.do("GET", "/v1/artifacts?sandbox_id="+id, nil); len(after["rows"].([]any)) != len(before["rows"].([]any)) {
					t.Fatalf("a failed export left an artifact: %v", after["rows"])
				}
				code, m, b = a.do("POST", "/v1/sandboxes/"+id+"/artifacts", map[string]any{"path": "/root/data"})
			}
			if code != 201 || m["sha256"] != want {
				t.Fatalf("export: %d %s, want 201 with sha256 %s", code, b, want)
			}
		})
	}
}

// TestWorkspaceSaveUnderObjectStoreFaults: a session stopped while its
// object store refuses, drops or resets connections for a while keeps
// trying to save its workspace and saves it once the store is back: the
// session ends stopped with no failure, and the next session of the
// context finds the workspace as it was. A store that stays down for the
// whole stop leaves the sandbox stopped, not deleted, with the workspace on
// its disk, and the session failed with a reason naming the sandbox.
func TestWorkspaceSaveUnderObjectStoreFaults(t *testing.T) {
	// A stop of 40 s: the save is retried for 30 s.
	d, fp := objectStoreDaemon(t, "--session-stop-timeout", "40s")
	a := apiOf(t, d)
	for _, f := range faults {
		if !f.fails {
			continue
		}
		for _, outage := range []time.Duration{8 * time.Second, time.Hour} {
			permanent := outage == time.Hour
			name := f.name + "/transient"
			if permanent {
				if f.name != "refused" {
					continue // one permanent outage is enough
				}
				name = f.name + "/permanent"
			}
			t.Run(name, func(t *testing.T) {
				a := &api{t: t, url: a.url, token: a.token}
				vault, wf := "vault-"+ptdtest.RandHex(4), "wf-"+ptdtest.RandHex(4)
				body := map[string]any{"vault_id": vault, "workflow_id": wf, "template": "busybox"}
				open := func() (string, string) {
					code, m, b := a.do("POST", "/v1/sessions", body)
					if code != 200 && code != 202 {
						t.Fatalf("session: %d %s", code, b)
					}
					sid := m["sessionId"].(string)
					if _, m, b = a.do("GET", "/v1/sessions/"+sid+"?wait_timeout_ms=240000", nil); m["status"] != "ready" {
						t.Fatalf("session never ready: %s", b)
					}
					return sid, m["sandbox_id"].(string)
				}
				sid, sb := open()
				want := fill(a, sb, "/workspace/data")
				f.apply(fp)
				defer fp.heal()
				healed := time.AfterFunc(outage, fp.heal)
				defer healed.Stop()
				if code, _, b := a.do("DELETE", "/v1/sessions/"+sid, nil); code != 202 && code != 200 {
					t.Fatalf("stop session: %d %s", code, b)
				}
				var m map[string]any
				for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
					_, m, _ = a.do("GET", "/v1/sessions/"+sid, nil)
					if m["status"] == "stopped" || m["status"] == "failed" {
						break
					}
				}
				reason, _ := m["reason"].(string)
				if permanent {
					if m["status"] != "failed" || !strings.Contains(reason, "workspace save failed") || !strings.Contains(reason, sb) {
						t.Fatalf("session stopped with the store down throughout: %v, want failed naming sandbox %s", m, sb)
					}
					if st := a.settle(sb, 3*time.Minute); st["state"] != "stopped" {
						t.Fatalf("the kept sandbox: %v, want stopped", st)
					}
					a.start(sb)
					if got := sum(a, sb, "/workspace/data"); got != want {
						t.Fatalf("the kept sandbox's workspace reads %s, want %s", got, want)
					}
					a.do("DELETE", "/v1/sandboxes/"+sb, nil)
					return
				}
				if m["status"] != "stopped" || reason != "user_stopped" {
					t.Fatalf("session stopped under %s for %s: %v, want stopped (user_stopped) with no failure", f.name, outage, m)
				}
				if st := a.get(sb); st["state"] != "deleted" && st["state"] != "deleting" {
					t.Errorf("the sandbox of a stopped session: %v, want deleted", st["state"])
				}
				sid2, sb2 := open()
				if got := sum(a, sb2, "/workspace/data"); got != want {
					t.Fatalf("the next session's workspace reads %s, want %s", got, want)
				}
				a.do("DELETE", "/v1/sessions/"+sid2+"?wait_timeout_ms=60000", nil)
			})
		}
	}
}
