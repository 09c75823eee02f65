package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/platinum-dev/platinum/internal/image/imagetest"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestTemplateCLI drives the org's templates through the real pt binary:
// create from an image, build from a Dockerfile and a context directory
// with a .dockerignore, list versions, delete one, registry logins.
func TestTemplateCLI(t *testing.T) {
	c := newClient(t)
	reg := imagetest.Registry(t, nil)
	imagetest.Push(t, reg+"/app:1", appImage(t))
	slug := c.slugFor("cli")

	out, errOut, code := pt(t, nil, "template", "create", slug, "--from-image", reg+"/app:1", "--env", "EXTRA=1")
	if code != 0 || !strings.Contains(out, "version 1 tplv_") {
		t.Fatalf("pt template create: %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "layer ") {
		t.Errorf("no layer progress on stderr: %s", errOut)
	}

	dir := t.TempDir()
	for name, body := range map[string]string{
		"Dockerfile":    "FROM " + slug + "\nCOPY . /ctx/\nUSER root\nRUN ls /ctx | sort | tr '\\n' ' ' > /ctx.txt\n",
		".dockerignore": "secret.txt\nlogs/\n!logs/keep.log\n",
		"app.txt":       "app", "secret.txt": "do not send", "logs/a.log": "a", "logs/keep.log": "k",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	out, errOut, code = pt(t, nil, "template", "build", slug, "-f", filepath.Join(dir, "Dockerfile"), dir, "--json")
	if code != 0 {
		t.Fatalf("pt template build: %d\n%s\n%s", code, out, errOut)
	}
	var b platinum.TemplateBuild
	if err := json.Unmarshal([]byte(out), &b); err != nil || b.Status != platinum.BuildReady || b.Version != 2 {
		t.Fatalf("--json: %v %s", err, out)
	}
	id := c.create(map[string]any{"template": slug})
	// The image's settings carry through the Dockerfile build (its FROM is
	// the org's template), .dockerignore kept two files out.
	if got := c.mustSh(id, `cat /ctx.txt; echo "$EXTRA"; [ -e /ctx/secret.txt ] || echo no-secret; ls /ctx/logs`); got != "Dockerfile app.txt logs 1\nno-secret\nkeep.log\n" {
		t.Errorf("built from the context: %q", got)
	}

	out, _, code = pt(t, nil, "template", "versions", slug)
	if code != 0 || strings.Count(out, "tplv_") != 2 {
		t.Errorf("pt template versions: %d %s", code, out)
	}
	out, errOut, code = pt(t, nil, "template", "rm", slug+"@1")
	if code != 0 || !strings.Contains(out, "deleted "+slug+"@tplv_") {
		t.Errorf("pt template rm @1: %d %s %s", code, out, errOut)
	}
	if out, _, _ := pt(t, nil, "template", "versions", slug); strings.Count(out, "tplv_") != 1 {
		t.Errorf("after rm: %s", out)
	}
	// The version the sandbox runs cannot go: the CLI says why and exits 1.
	if _, errOut, code := pt(t, nil, "template", "rm", slug); code != 1 || !strings.Contains(errOut, id) {
		t.Errorf("pt template rm in use: %d %s", code, errOut)
	}

	// A failing build exits 1 naming the step, its line and exit code.
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM busybox\nRUN exit 7\n"), 0o644)
	_, errOut, code = pt(t, nil, "template", "build", slug, dir)
	if code != 1 || !strings.Contains(errOut, "step 1/1 (Dockerfile line 2: RUN exit 7) exited with code 7") {
		t.Errorf("failed build: %d %s", code, errOut)
	}

	host := strings.Split(reg, "/")[0]
	if out, errOut, code := pt(t, []byte("s3cret\n"), "registry", "login", host, "--username", "bob", "--password-stdin"); code != 0 {
		t.Fatalf("registry login: %d %s %s", code, out, errOut)
	}
	if out, _, _ := pt(t, nil, "registry", "list"); !strings.Contains(out, host) || !strings.Contains(out, "bob") || strings.Contains(out, "s3cret") {
		t.Errorf("registry list: %s", out)
	}
	if _, _, code := pt(t, nil, "registry", "logout", host); code != 0 {
		t.Errorf("registry logout: %d", code)
	}
}

// TestTemplateSDK drives the same through the Go SDK, credentials and a
// registry that wants them included.
func TestTemplateSDK(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := platinum.New(env.url, env.token)
	const user, pass = "sdk", "sdk-pass"
	reg := imagetest.Registry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	imagetest.Push(t, reg+"/app:1", appImage(t), remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: user, Password: pass})))
	slug := c.slugFor("sdk")

	_, err := cl.Templates.Create(ctx, platinum.CreateTemplateRequest{Slug: slug, FromImage: reg + "/app:1"})
	var ae *platinum.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 403 || ae.Code != "image_unauthorized" {
		t.Fatalf("create without credentials: %v", err)
	}
	host := strings.Split(reg, "/")[0]
	if _, err := cl.Templates.SetRegistryCredential(ctx, host, user, pass, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Templates.DeleteRegistryCredential(context.Background(), host) })
	b, err := cl.Templates.Create(ctx, platinum.CreateTemplateRequest{Slug: slug, FromImage: reg + "/app:1",
		Settings: &platinum.TemplateSettingsInput{Workdir: "/opt", Env: map[string]string{"FROM_SDK": "yes"}}})
	if err != nil {
		t.Fatal(err)
	}
	var pulls int
	done, err := cl.Templates.Wait(ctx, slug, b.ID, func(l platinum.BuildLogLine) {
		if l.Type == "pull" && l.Bytes > 0 {
			pulls++
		}
	})
	if err != nil || done.Status != platinum.BuildReady || done.VersionID == "" || pulls == 0 {
		t.Fatalf("wait: %+v %v (pull lines %d)", done, err, pulls)
	}
	tpl, err := cl.Templates.Get(ctx, slug)
	if err != nil || tpl.Owner != "org" || tpl.Settings == nil || tpl.Settings.Workdir != "/opt" || tpl.Source.Kind != "image" {
		t.Fatalf("get: %+v %v", tpl, err)
	}
	h, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: slug}, platinum.WaitForRunning(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), h.ID) })
	res, err := cl.Sandboxes.Exec(ctx, h.ID, platinum.ExecRequest{Cmd: []string{"/bin/sh", "-c", `pwd; echo $FROM_SDK $GREETING`}})
	if err != nil || res.Stdout != "/opt\nyes hello from the image\n" {
		t.Errorf("exec: %+v %v", res, err)
	}

	// A Dockerfile from a packed context.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hi"), 0o644)
	var ctxTar bytes.Buffer
	if _, err := platinum.PackContext(dir, &ctxTar); err != nil {
		t.Fatal(err)
	}
	up, err := cl.Templates.UploadContext(ctx, &ctxTar)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := cl.Templates.Create(ctx, platinum.CreateTemplateRequest{Slug: slug, Dockerfile: "FROM " + slug + "\nCOPY hello.txt /\n", ContextUploadID: up.ID})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := cl.Templates.Wait(ctx, slug, b2.ID, nil); err != nil || done.Status != platinum.BuildReady || done.Version != 2 {
		t.Fatalf("dockerfile build: %+v %v", done, err)
	}
	lg, err := cl.Templates.Logs(ctx, slug, b2.ID, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for {
		l, err := lg.Next()
		if err != nil {
			break
		}
		types = append(types, l.Type)
	}
	lg.Close()
	if len(types) == 0 || types[len(types)-1] != "done" {
		t.Errorf("log types: %v", types)
	}
	vs, err := cl.Templates.Versions(ctx, slug)
	if err != nil || len(vs) != 2 || vs[0].Source == nil || vs[0].Source.Kind != "dockerfile" {
		t.Errorf("versions: %+v %v", vs, err)
	}
	if err := cl.Templates.DeleteVersion(ctx, slug, vs[0].ID); err != nil {
		t.Errorf("delete version: %v", err)
	}
	if _, err := cl.Templates.Delete(ctx, slug); !errors.As(err, &ae) || ae.Code != "template_in_use" {
		t.Errorf("delete in use: %v", err)
	}
}
