package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/platinum-dev/platinum/internal/image/imagetest"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestTemplateOnEveryHost: a custom template built on one host boots on
// another whose machine never had it (docs/ARCHITECTURE.md, "Template
// versions on every host"). Two hosts join an api-only ptd; host 0 builds
// a template from an image (host 1 draining meanwhile), which also writes
// its rootfs to the platform's object store. Host 0 is killed and its data
// dir's templates removed, as if its machine were gone; once it is lost, a
// create of the template lands on host 1, which unpacks its own copy under
// its own data dir and boots it with the image's file. Deleting the
// template through the api-only ptd removes its copy from the object store,
// and host 1's sweep its files.
func TestTemplateOnEveryHost(t *testing.T) {
	requireEnv(t)
	common := []string{"--pids-limit", "256", "--host-heartbeat", "200ms", "--host-lost-after", "3s", "--image-registry-allow-private"}
	objects := t.TempDir()
	api, hosts, _ := startJoined(t, 2, common, []string{"--objects", objects}, []string{"--reconcile-interval", "2s"})
	ids := []string{hostIDOf(t, hosts[0]), hostIDOf(t, hosts[1])}
	ctx := context.Background()
	cl := platinum.New(api.URL, api.Token)

	reg := imagetest.Registry(t, nil)
	ref := reg + "/every/host:1"
	imagetest.Push(t, ref, imagetest.Image(t, v1.Config{Env: []string{"PATH=/bin"}}, busyboxLayer(t),
		imagetest.Layer(t, imagetest.Entry{Name: "etc/built-on", Body: "host 0"})))
	slug := "everyhost-" + randHex(4)
	deleted := false
	t.Cleanup(func() {
		for deadline := time.Now().Add(time.Minute); !deleted; time.Sleep(500 * time.Millisecond) {
			var ae *platinum.APIError
			if _, err := cl.Templates.Delete(context.Background(), slug); !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || time.Now().After(deadline) {
				return
			}
		}
	})

	// Host 0 builds: host 1 drains while the build is placed.
	if _, err := cl.Hosts.Drain(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	b, err := cl.Templates.Create(ctx, platinum.CreateTemplateRequest{Slug: slug, FromImage: ref})
	if err != nil {
		t.Fatalf("template build: %v", err)
	}
	if b, err = cl.Templates.Wait(ctx, slug, b.ID, nil); err != nil || b.Status != platinum.BuildReady {
		t.Fatalf("template build: %+v %v", b, err)
	}
	if _, err := cl.Hosts.Undrain(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	built := filepath.Join(hosts[0].DataDir, "templates", b.VersionID, "rootfs")
	if _, err := os.Stat(filepath.Join(built, "etc/built-on")); err != nil {
		t.Fatalf("host 0 did not build the version: %v", err)
	}
	manifest := filepath.Join(objects, "platinum-archives", "manifests", b.VersionID+".json")
	if _, err := os.Stat(manifest); err != nil {
		t.Fatalf("the build wrote no copy to the object store: %v", err)
	}
	copied := filepath.Join(hosts[1].DataDir, "templates", b.VersionID, "rootfs")
	if _, err := os.Stat(copied); err == nil {
		t.Fatal("host 1 holds the version before any boot there")
	}

	// Host 0's machine is gone: ptd killed, its templates removed.
	hosts[0].Kill()
	if err := os.RemoveAll(filepath.Join(hosts[0].DataDir, "templates")); err != nil {
		t.Fatal(err)
	}
	waitHostState(t, cl, ids[0], "lost")

	// Two creates at once on host 1 share one copy.
	boxes := make([]*platinum.Sandbox, 2)
	errs := make([]error, 2)
	done := make(chan int)
	for i := range boxes {
		go func() {
			boxes[i], errs[i] = cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: slug}, platinum.WaitForRunning(3*time.Minute))
			done <- i
		}()
	}
	for range boxes {
		<-done
	}
	for i, sb := range boxes {
		if errs[i] != nil {
			t.Fatalf("create %d of the template with host 0 gone: %v", i, errs[i])
		}
		t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
		if sb.HostID != ids[1] || sb.TemplateVersionID != b.VersionID {
			t.Fatalf("create %d: host %s version %s, want host 1 (%s) and version %s", i, sb.HostID, sb.TemplateVersionID, ids[1], b.VersionID)
		}
		res, err := cl.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "cat /etc/built-on"})
		if err != nil || res.Stdout != "host 0" {
			t.Fatalf("the template's file in sandbox %d on host 1: %+v %v", i, res, err)
		}
	}
	if _, err := os.Stat(filepath.Join(copied, "etc/built-on")); err != nil {
		t.Fatalf("host 1's own copy: %v", err)
	}

	// The template deleted (its sandboxes first): its copy leaves the
	// object store.
	for _, sb := range boxes {
		if _, err := cl.Sandboxes.Delete(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		var ae *platinum.APIError
		_, err := cl.Templates.Delete(ctx, slug)
		if err == nil {
			deleted = true
			break
		}
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || time.Now().After(deadline) {
			t.Fatalf("delete the template: %v", err)
		}
	}
	if _, err := os.Stat(manifest); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the object store's copy after the delete: %v", err)
	}
	// The delete ran on the api-only ptd: host 1's sweep removes its copy
	// once the directory is older than the sweep's grace (30 s).
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		_, err := os.Stat(filepath.Dir(copied))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host 1's copy two minutes after the delete: %v", err)
		}
	}
}
