package e2e

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/platinum-dev/platinum/internal/image/imagetest"
)

// Custom templates end to end (docs/templates.md): images pulled from a
// registry on loopback, built here from the busybox rootfs; Dockerfile
// builds; start and ready commands; started-state snapshots; org scoping
// and refusals that change nothing.

// slugFor makes a unique template slug and deletes the template when the
// test ends (after its sandboxes, whose deletes may take a moment).
func (c *client) slugFor(prefix string) string {
	c.t.Helper()
	slug := prefix + "-" + randHex(4)
	c.t.Cleanup(func() {
		deadline := time.Now().Add(60 * time.Second)
		for {
			r := c.do("DELETE", "/v1/templates/"+slug, nil)
			if r.Status != 409 || time.Now().After(deadline) {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
	return slug
}

// appImage is busybox plus layers that unpacking must get right: a
// whiteout, an opaque directory, hard links (one to a lower layer's file)
// and a symlink pointing outside the root filesystem, with env, workdir
// and user in its config.
func appImage(t *testing.T) v1.Image {
	extra := imagetest.Layer(t,
		imagetest.Entry{Name: "opt/keep/a", Body: "a"},
		imagetest.Entry{Name: "opt/hide/old", Body: "old"},
		imagetest.Entry{Name: "etc/motd", Body: "hello\n"},
	)
	top := imagetest.Layer(t,
		imagetest.Entry{Name: "etc/.wh.motd"},
		imagetest.Entry{Name: "opt/hide/", Type: tar.TypeDir},
		imagetest.Entry{Name: "opt/hide/.wh..wh..opq"},
		imagetest.Entry{Name: "opt/hide/new", Body: "new"},
		imagetest.Entry{Name: "srv/", Type: tar.TypeDir, UID: 1000, GID: 1000},
		imagetest.Entry{Name: "srv/one", Body: "same inode", UID: 1000, GID: 1000},
		imagetest.Entry{Name: "srv/two", Type: tar.TypeLink, Link: "srv/one"},
		imagetest.Entry{Name: "srv/sh", Type: tar.TypeLink, Link: "bin/busybox"},
		imagetest.Entry{Name: "srv/outside", Type: tar.TypeSymlink, Link: "../../../../../etc/shadow"},
	)
	return imagetest.Image(t, v1.Config{
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "GREETING=hello from the image"}, WorkingDir: "/srv", User: "1000:1000",
	}, busyboxLayer(t), extra, top)
}

func TestTemplateFromImage(t *testing.T) {
	c := newClient(t)
	reg := imagetest.Registry(t, nil)
	ref := reg + "/team/app:v1"
	imagetest.Push(t, ref, appImage(t))
	slug := c.slugFor("img")

	b, lg := c.build(map[string]any{"slug": slug, "from_image": ref})
	if b["kind"] != "image" || b["version"] != float64(1) || b["version_id"] == nil {
		t.Errorf("build: %v", b)
	}
	pulled := 0
	for _, p := range lg.of("pull") {
		if p["bytes"].(float64) > 0 && p["total"].(float64) > 0 {
			pulled++
		}
	}
	if pulled < 3 {
		t.Errorf("pull progress for %d layers with bytes, want 3:\n%s", pulled, lg)
	}

	tpl := c.do("GET", "/v1/templates/"+slug, nil).JSON()
	settings, _ := tpl["settings"].(map[string]any)
	source, _ := tpl["source"].(map[string]any)
	if tpl["owner"] != "org" || settings["user"] != "1000:1000" || settings["workdir"] != "/srv" ||
		source["image"] != ref || !strings.HasPrefix(fmt.Sprint(source["image_digest"]), "sha256:") {
		t.Errorf("template: %v", tpl)
	}

	id := c.create(map[string]any{"template": slug})
	out := c.mustSh(id, `echo "$GREETING"; pwd; id -u; id -g; cat /opt/keep/a /opt/hide/new; echo; ls /opt/hide; `+
		`[ -e /etc/motd ] || echo motd-gone; [ "$(stat -c %i /srv/one)" = "$(stat -c %i /srv/two)" ] && echo linked; `+
		`[ "$(stat -c %i /srv/sh)" = "$(stat -c %i /bin/busybox)" ] && echo linked-down; readlink /srv/outside`)
	want := "hello from the image\n/srv\n1000\n1000\nanew\nnew\nmotd-gone\nlinked\nlinked-down\n../../../../../etc/shadow\n"
	if out != want {
		t.Errorf("in the sandbox:\n%s\nwant:\n%s", out, want)
	}

	// A second build of the slug is a new version; its layers are stored
	// already, so none is fetched.
	b2, lg2 := c.build(map[string]any{"slug": slug, "from_image": ref})
	if b2["version"] != float64(2) {
		t.Errorf("second build: %v", b2)
	}
	for _, p := range lg2.of("pull") {
		if p["cached"] != true {
			t.Errorf("second pull fetched a stored layer: %v", p)
		}
	}
	vs := c.do("GET", "/v1/templates/"+slug+"/versions", nil).JSON()["rows"].([]any)
	if len(vs) != 2 || vs[0].(map[string]any)["id"] != b2["version_id"] {
		t.Errorf("versions: %v", vs)
	}
	// template_version_id pins the first.
	pinned := c.do("POST", "/v1/sandboxes", map[string]any{"template_version_id": b["version_id"]})
	if pinned.Status != 201 && pinned.Status != 202 || pinned.JSON()["template_version_id"] != b["version_id"] {
		t.Errorf("pinned create: %d %s", pinned.Status, pinned.Body)
	}
	if pid, ok := pinned.JSON()["id"].(string); ok {
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+pid, nil) })
	}
}

func TestTemplateFromShellLessImage(t *testing.T) {
	c := newClient(t)
	reg := imagetest.Registry(t, nil)
	// No shell, no /etc/passwd: only a static binary.
	img := imagetest.Image(t, v1.Config{Cmd: []string{"/counter", "-addr", ":8080"}},
		imagetest.Layer(t, imagetest.Entry{Name: "counter", Body: string(counterBinary(t)), Mode: 0o755}))
	imagetest.Push(t, reg+"/bare:1", img)
	slug := c.slugFor("bare")
	c.build(map[string]any{"slug": slug, "from_image": reg + "/bare:1",
		"settings": map[string]any{"ready_cmd": []string{"/counter", "-probe", "127.0.0.1:8080"}}})
	id := c.create(map[string]any{"template": slug})
	r := c.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"/counter", "-get", "127.0.0.1:8080"}})
	var res execResult
	json.Unmarshal(r.Body, &res)
	if r.Status != 200 || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "count=2 ") {
		t.Errorf("the image's CMD as start_cmd: %d %s", r.Status, r.Body)
	}
}

func TestTemplateImageImportTarball(t *testing.T) {
	c := newClient(t)
	slug := c.slugFor("tarball")
	var buf strings.Builder
	if err := writeDockerSave(&buf, appImage(t)); err != nil {
		t.Fatal(err)
	}
	up := c.upload("image", []byte(buf.String()))
	b, _ := c.build(map[string]any{"slug": slug, "image_upload_id": up})
	if b["kind"] != "upload" {
		t.Errorf("build: %v", b)
	}
	id := c.create(map[string]any{"template": slug})
	if out := c.mustSh(id, `pwd; cat /opt/hide/new`); out != "/srv\nnew" {
		t.Errorf("from the tarball: %q", out)
	}
}

func TestTemplateRefusals(t *testing.T) {
	c := newClient(t)
	reg := imagetest.Registry(t, nil)
	imagetest.Push(t, reg+"/app:1", appImage(t))
	const user, pass = "alice", "s3cret-registry-pass"
	authReg := imagetest.Registry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	imagetest.Push(t, authReg+"/private:1", appImage(t), remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: user, Password: pass})))
	slug := c.slugFor("refused")
	big := make([]byte, e2eContextMaxBytes+(1<<20))
	for i := range big {
		big[i] = byte(i)
	}

	before := c.do("GET", "/v1/templates", nil).Body
	for _, tc := range []struct {
		name   string
		body   map[string]any
		path   string // default POST /v1/templates
		raw    []byte
		status int
		code   string
		field  string
		line   float64
	}{
		{name: "unknown image", body: map[string]any{"slug": slug, "from_image": reg + "/nope:1"}, status: 404, code: "image_not_found", field: "from_image"},
		{name: "unknown tag", body: map[string]any{"slug": slug, "from_image": reg + "/app:nope"}, status: 404, code: "image_not_found", field: "from_image"},
		{name: "unauthorized pull", body: map[string]any{"slug": slug, "from_image": authReg + "/private:1"}, status: 403, code: "image_unauthorized", field: "from_image"},
		{name: "malformed reference", body: map[string]any{"slug": slug, "from_image": "UPPER/Case::x"}, status: 400, code: "image_invalid", field: "from_image"},
		{name: "malformed Dockerfile", body: map[string]any{"slug": slug, "dockerfile": "FROM busybox\nRUN true\nFROOB x\n"}, status: 400, code: "dockerfile_invalid", field: "dockerfile", line: 3},
		{name: "unsupported instruction", body: map[string]any{"slug": slug, "dockerfile": "FROM busybox\nCOPY --from=build /a /b\n"}, status: 400, code: "dockerfile_unsupported", field: "dockerfile", line: 2},
		{name: "multi-stage", body: map[string]any{"slug": slug, "dockerfile": "FROM busybox AS a\nFROM busybox\n"}, status: 400, code: "dockerfile_unsupported", field: "dockerfile", line: 2},
		{name: "Dockerfile FROM an unknown image", body: map[string]any{"slug": slug, "dockerfile": "\nFROM " + reg + "/nope:1\n"}, status: 404, code: "image_not_found", field: "dockerfile", line: 2},
		{name: "platform slug", body: map[string]any{"slug": "busybox", "from_image": reg + "/app:1"}, status: 409, code: "template_slug_reserved", field: "slug"},
		{name: "bad slug", body: map[string]any{"slug": "Bad Slug", "from_image": reg + "/app:1"}, status: 400, code: "invalid_request", field: "slug"},
		{name: "two sources", body: map[string]any{"slug": slug, "from_image": reg + "/app:1", "dockerfile": "FROM busybox\n"}, status: 400, code: "invalid_request", field: "from_image"},
		{name: "unknown context upload", body: map[string]any{"slug": slug, "dockerfile": "FROM busybox\n", "context_upload_id": "tupl_01KABCDEFGHJKMNPQRSTVWXYZ0"}, status: 404, code: "not_found", field: "context_upload_id"},
		{name: "snapshot without start_cmd", body: map[string]any{"slug": slug, "from_image": reg + "/app:1", "snapshot": true}, status: 400, code: "invalid_request", field: "snapshot"},
		{name: "context over the limit", path: "/v1/templates/uploads?purpose=context", raw: big, status: 413, code: "upload_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r response
			if tc.path != "" {
				r = c.do("POST", tc.path, tc.raw)
			} else {
				r = c.do("POST", "/v1/templates", tc.body)
			}
			m := r.JSON()
			if r.Status != tc.status || m["code"] != tc.code {
				t.Fatalf("%d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
			}
			if tc.field != "" && m["field"] != tc.field {
				t.Errorf("field = %v, want %s", m["field"], tc.field)
			}
			if tc.line != 0 && m["line"] != tc.line {
				t.Errorf("line = %v, want %v", m["line"], tc.line)
			}
			if tc.code == "upload_too_large" && m["max_bytes"] != float64(e2eContextMaxBytes) {
				t.Errorf("max_bytes = %v", m["max_bytes"])
			}
			if strings.Contains(string(r.Body), pass) {
				t.Error("the answer shows the registry password")
			}
		})
	}
	// Each refusal changed nothing.
	if after := c.do("GET", "/v1/templates", nil).Body; string(after) != string(before) {
		t.Errorf("templates changed:\nbefore %s\nafter  %s", before, after)
	}
	if r := c.do("GET", "/v1/templates/"+slug+"/versions", nil); r.Status != 404 {
		t.Errorf("versions of a refused slug: %d %s", r.Status, r.Body)
	}

	// With the org's credentials stored, the private image builds; the
	// password is never shown.
	host := strings.Split(authReg, "/")[0]
	r := c.do("PUT", "/v1/registry-credentials/"+host, map[string]any{"username": user, "password": pass})
	if r.Status != 200 || strings.Contains(string(r.Body), pass) {
		t.Fatalf("store credentials: %d %s", r.Status, r.Body)
	}
	t.Cleanup(func() { c.do("DELETE", "/v1/registry-credentials/"+host, nil) })
	if l := c.do("GET", "/v1/registry-credentials", nil); !strings.Contains(string(l.Body), host) || strings.Contains(string(l.Body), pass) {
		t.Errorf("credentials list: %s", l.Body)
	}
	c.build(map[string]any{"slug": slug, "from_image": authReg + "/private:1"})
	// Another org has no such credentials.
	other := newOrg(t, c)
	if r := other.do("POST", "/v1/templates", map[string]any{"slug": "x", "from_image": authReg + "/private:1"}); r.Status != 403 {
		t.Errorf("another org's pull: %d %s", r.Status, r.Body)
	}
}

func TestTemplateSymlinkEscapeRefused(t *testing.T) {
	c := newClient(t)
	reg := imagetest.Registry(t, nil)
	img := imagetest.Image(t, v1.Config{}, busyboxLayer(t), imagetest.Layer(t,
		imagetest.Entry{Name: "evil", Type: tar.TypeSymlink, Link: "/etc"},
		imagetest.Entry{Name: "evil/pwned", Body: "written through a symlink"},
	))
	imagetest.Push(t, reg+"/evil:1", img)
	slug := c.slugFor("evil")
	b := c.startBuild(map[string]any{"slug": slug, "from_image": reg + "/evil:1"})
	got, lg := c.followBuild(slug, b["id"].(string))
	if got["status"] != "failed" || !strings.Contains(fmt.Sprint(got["error"]), "symlink") || got["version_id"] != nil {
		t.Errorf("build: %v\n%s", got, lg)
	}
	if r := c.do("GET", "/v1/templates/"+slug+"/versions", nil); r.Status != 404 {
		t.Errorf("a failed build made a version: %d %s", r.Status, r.Body)
	}
	if out, _ := exec.Command("sh", "-c", "ls /etc/pwned 2>&1").CombinedOutput(); !strings.Contains(string(out), "No such file") {
		t.Errorf("/etc/pwned on the host: %s", out)
	}
}

func TestTemplateOrgScoping(t *testing.T) {
	c := newClient(t)
	reg := imagetest.Registry(t, nil)
	imagetest.Push(t, reg+"/app:1", appImage(t))
	slug := c.slugFor("scoped")
	b, _ := c.build(map[string]any{"slug": slug, "from_image": reg + "/app:1"})
	other := newOrg(t, c)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/templates/" + slug},
		{"GET", "/v1/templates/" + slug + "/versions"},
		{"GET", "/v1/templates/" + slug + "/builds/" + b["id"].(string)},
		{"GET", "/v1/templates/" + slug + "/builds/" + b["id"].(string) + "/logs"},
		{"DELETE", "/v1/templates/" + slug},
	} {
		if r := other.do(tc.method, tc.path, nil); r.Status != 404 {
			t.Errorf("another org: %s %s = %d %s", tc.method, tc.path, r.Status, r.Body)
		}
	}
	if list := other.do("GET", "/v1/templates", nil); strings.Contains(string(list.Body), slug) {
		t.Errorf("another org lists the template: %s", list.Body)
	}
	for _, body := range []map[string]any{{"template": slug}, {"template_version_id": b["version_id"]}} {
		r := other.do("POST", "/v1/sandboxes", body)
		if r.Status != 404 {
			t.Errorf("another org creates from %v: %d %s", body, r.Status, r.Body)
		}
	}
	// The other org may have a template of the same slug; each sees its own.
	ob, _ := other.build(map[string]any{"slug": slug, "from_image": reg + "/app:1"})
	t.Cleanup(func() { other.do("DELETE", "/v1/templates/"+slug, nil) })
	if ob["version"] != float64(1) || ob["version_id"] == b["version_id"] {
		t.Errorf("the other org's build: %v", ob)
	}
	// Platform templates are visible to both.
	if r := other.do("GET", "/v1/templates/busybox", nil); r.Status != 200 {
		t.Errorf("platform template: %d", r.Status)
	}
	// A version in use cannot be deleted; nothing is deleted then.
	id := c.create(map[string]any{"template": slug})
	r := c.do("DELETE", "/v1/templates/"+slug, nil)
	if r.Status != 409 || r.JSON()["code"] != "template_in_use" || !strings.Contains(string(r.Body), id) {
		t.Errorf("delete in use: %d %s", r.Status, r.Body)
	}
	if r := c.do("GET", "/v1/templates/"+slug, nil); r.Status != 200 {
		t.Errorf("after a refused delete: %d", r.Status)
	}
}

func TestDockerfileBuild(t *testing.T) {
	c := newClient(t)
	slug := c.slugFor("df")
	dockerfile := `FROM busybox
ENV APP_HOME=/srv/app
WORKDIR $APP_HOME
COPY app.txt ./
COPY --chmod=0750 --chown=user:user run.sh /usr/local/bin/run.sh
RUN run.sh | tee built.txt && chown -R user:user $APP_HOME
ARG FLAVOR=plain
RUN echo "$FLAVOR" > flavor.txt
ENV MODE=prod
USER user
LABEL org.example.app=test
EXPOSE 8080
`
	files := map[string]string{"app.txt": "v1", "run.sh+x": "#!/bin/sh\necho built by $(id -un) in $(pwd)\n", "unused.txt": "u"}
	body := map[string]any{"slug": slug, "dockerfile": dockerfile, "context_upload_id": c.upload("context", contextTar(files)),
		"build_args": map[string]string{"FLAVOR": "spicy"}}
	b, lg := c.build(body)
	if b["kind"] != "dockerfile" {
		t.Errorf("build: %v", b)
	}
	t.Logf("cold build: %s", lg.took)
	for _, s := range lg.of("step") {
		if s["line"] == nil || s["instruction"] == nil {
			t.Errorf("step line without its Dockerfile line: %v", s)
		}
	}
	if !strings.Contains(lg.String(), "built by root in /srv/app") {
		t.Errorf("RUN output not in the log:\n%s", lg)
	}
	id := c.create(map[string]any{"template": slug})
	out := c.mustSh(id, `pwd; id -un; echo $MODE $APP_HOME; cat app.txt; echo; cat built.txt flavor.txt; `+
		`stat -c '%a %U' /usr/local/bin/run.sh; stat -c %U /srv/app/app.txt; [ -e unused.txt ] || echo no-unused`)
	want := "/srv/app\nuser\nprod /srv/app\nv1\nbuilt by root in /srv/app\nspicy\n750 user\nuser\nno-unused\n"
	if out != want {
		t.Errorf("in the sandbox:\n%s\nwant:\n%s", out, want)
	}
	tpl := c.do("GET", "/v1/templates/"+slug, nil).JSON()
	if st := tpl["settings"].(map[string]any); st["user"] != "user" || st["workdir"] != "/srv/app" ||
		fmt.Sprint(st["exposed_ports"]) != "[8080/tcp]" || fmt.Sprint(st["labels"]) != "map[org.example.app:test]" {
		t.Errorf("settings: %v", st)
	}

	// The same build again: every step that changes files is a cache hit.
	_, lg2 := c.build(body)
	cached := 0
	for _, l := range lg2.of("cache") {
		if l["cached"] != true {
			t.Errorf("rebuild ran step %v", l)
		}
		cached++
	}
	if cached != 5 {
		t.Errorf("%d cache hits, want 5:\n%s", cached, lg2)
	}
	t.Logf("fully cached rebuild: %s", lg2.took)

	// One copied file changes: the steps before its COPY are reused, it
	// and the ones after run again.
	files["app.txt"] = "v2"
	body["context_upload_id"] = c.upload("context", contextTar(files))
	b3, lg3 := c.build(body)
	hits := map[float64]bool{}
	for _, l := range lg3.of("cache") {
		hits[l["line"].(float64)] = l["cached"] == true
	}
	wantHits := map[float64]bool{3: true, 4: false, 5: false, 6: false, 8: false}
	if fmt.Sprint(hits) != fmt.Sprint(wantHits) {
		t.Errorf("cache hits by line %v, want %v:\n%s", hits, wantHits, lg3)
	}
	t.Logf("rebuild after one change: %s", lg3.took)
	id3 := c.create(map[string]any{"template": slug, "template_version_id": b3["version_id"]})
	if out := c.mustSh(id3, "cat app.txt"); out != "v2" {
		t.Errorf("app.txt = %q", out)
	}

	// no_cache runs every step.
	body["no_cache"] = true
	_, lg4 := c.build(body)
	for _, l := range lg4.of("cache") {
		if l["cached"] == true {
			t.Errorf("no_cache build used the cache: %v", l)
		}
	}
}

func TestDockerfileFailingRun(t *testing.T) {
	c := newClient(t)
	slug := c.slugFor("dffail")
	vs := func() int {
		r := c.do("GET", "/v1/templates/"+slug+"/versions", nil)
		if r.Status == 404 {
			return 0
		}
		return len(r.JSON()["rows"].([]any))
	}
	c.build(map[string]any{"slug": slug, "dockerfile": "FROM busybox\nRUN echo ok > /ok\n"})
	b := c.startBuild(map[string]any{"slug": slug, "dockerfile": "FROM busybox\nRUN echo ok > /ok\nENV A=1\nRUN echo failing >&2; exit 3\nRUN never\n"})
	got, lg := c.followBuild(slug, b["id"].(string))
	f, _ := got["failure"].(map[string]any)
	if got["status"] != "failed" || f["step"] != float64(3) || f["steps"] != float64(4) || f["line"] != float64(4) || f["exit_code"] != float64(3) ||
		!strings.Contains(fmt.Sprint(f["instruction"]), "exit 3") || got["version_id"] != nil {
		t.Errorf("failed build: %v\n%s", got, lg)
	}
	errs := lg.of("error")
	if len(errs) == 0 || errs[0]["exit_code"] == nil && !strings.Contains(fmt.Sprint(errs[0]["text"]), "code 3") {
		t.Errorf("the log does not say how it failed:\n%s", lg)
	}
	if !strings.Contains(lg.String(), "failing") {
		t.Errorf("the failing RUN's output is not in the log:\n%s", lg)
	}
	if n := vs(); n != 1 {
		t.Errorf("%d versions after a failed build, want the 1 from before", n)
	}
}

func TestTemplateStartAndReadyCommands(t *testing.T) {
	c := newClient(t)
	reg := imagetest.Registry(t, nil)
	img := imagetest.Image(t, v1.Config{}, busyboxLayer(t), imagetest.Layer(t, imagetest.Entry{Name: "usr/local/bin/counter", Body: string(counterBinary(t)), Mode: 0o755}))
	imagetest.Push(t, reg+"/counter:1", img)
	slug := c.slugFor("served")
	c.build(map[string]any{"slug": slug, "from_image": reg + "/counter:1", "settings": map[string]any{
		"start_cmd": "counter -addr :8080 2>/tmp/counter.log", "ready_cmd": []string{"counter", "-probe", "127.0.0.1:8080"}}})
	id := c.create(map[string]any{"template": slug})
	// One attempt, right after the create returned: the ready command
	// made sure the server answers.
	if out := c.mustSh(id, "counter -get 127.0.0.1:8080"); !strings.HasPrefix(out, "count=2 ") {
		t.Errorf("the start_cmd server: %q", out)
	}
	// A cold boot (a resize while stopped drops the kept memory) starts
	// it again.
	if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.Status != 200 {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"ram_mb": 768}); r.Status != 200 {
		t.Fatalf("resize: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil); r.Status != 200 || r.JSON()["restore"] != "disk_only" {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	if out := c.mustSh(id, "counter -get 127.0.0.1:8080"); !strings.HasPrefix(out, "count=2 ") {
		t.Errorf("after a cold start: %q", out)
	}

	// A ready command that never passes fails the create, with why.
	slow := c.slugFor("never-ready")
	c.build(map[string]any{"slug": slow, "from_image": reg + "/counter:1", "settings": map[string]any{
		"ready_cmd": "echo not yet; exit 1", "ready_timeout_ms": 1500}})
	r := c.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=120000", map[string]any{"template": slow})
	m := r.JSON()
	if pid, ok := m["id"].(string); ok {
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+pid, nil) })
	}
	if r.Status != 409 || m["code"] != "sandbox_failed" || !strings.Contains(fmt.Sprint(m["reason"]), "ready_cmd did not pass within 1.5s") ||
		!strings.Contains(fmt.Sprint(m["reason"]), "not yet") {
		t.Errorf("create with a failing ready_cmd: %d %s", r.Status, r.Body)
	}
}

func TestTemplateStartedStateSnapshot(t *testing.T) {
	c := newClient(t)
	reg := imagetest.Registry(t, nil)
	img := imagetest.Image(t, v1.Config{Cmd: []string{"counter", "-addr", ":8080"}, Env: []string{"PATH=/usr/local/bin:/bin"}},
		busyboxLayer(t), imagetest.Layer(t, imagetest.Entry{Name: "usr/local/bin/counter", Body: string(counterBinary(t)), Mode: 0o755}))
	imagetest.Push(t, reg+"/counter:1", img)
	slug := c.slugFor("started")
	_, lg := c.build(map[string]any{"slug": slug, "from_image": reg + "/counter:1", "snapshot": true,
		"settings": map[string]any{"ready_cmd": []string{"counter", "-probe", "127.0.0.1:8080"}, "runtime": "gvisor", "ram_mb": 512}})
	if !strings.Contains(lg.String(), "memory snapshot") {
		t.Errorf("no snapshot in the log:\n%s", lg)
	}
	if tpl := c.do("GET", "/v1/templates/"+slug, nil).JSON(); tpl["snapshot"] != true {
		t.Errorf("template: %v", tpl)
	}
	createdAt := time.Now().UnixNano()
	var hostnames []string
	for range 2 {
		r := c.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", map[string]any{"template": slug})
		m := r.JSON()
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		id := m["id"].(string)
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
		if m["restore"] != "memory" || m["ram_restored"] != true || m["runtime"] != "gvisor" {
			t.Errorf("create: restore %v ram_restored %v runtime %v, want memory on gvisor: %s", m["restore"], m["ram_restored"], m["runtime"], r.Body)
		}
		// The server was started during the build: its start time is
		// before this create, and its count goes on from the snapshot's
		// (the build's probe, this create's, this request).
		out := c.mustSh(id, "counter -get 127.0.0.1:8080")
		var count, start int64
		if _, err := fmt.Sscanf(out, "count=%d start=%d", &count, &start); err != nil {
			t.Fatalf("counter: %q", out)
		}
		if start >= createdAt || count < 3 {
			t.Errorf("the server was not restored: count %d, start %d (create at %d)", count, start, createdAt)
		}
		hostnames = append(hostnames, strings.TrimSpace(c.mustSh(id, "hostname")))
		if hostnames[len(hostnames)-1] != id {
			t.Errorf("hostname %q, want the sandbox's own id %s", hostnames[len(hostnames)-1], id)
		}
	}
	// Another size boots cold, and says why.
	r := c.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", map[string]any{"template": slug, "ram_mb": 768})
	m := r.JSON()
	if id, ok := m["id"].(string); ok {
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
		if out := c.mustSh(id, "counter -get 127.0.0.1:8080"); !strings.HasPrefix(out, "count=2 ") {
			t.Errorf("cold boot's server: %q", out)
		}
	}
	md, _ := m["metadata"].(map[string]any)
	if r.Status != 201 || m["restore"] != "disk_only" || !strings.Contains(fmt.Sprint(md["last_start"]), "booted cold") {
		t.Errorf("another size: %d %s", r.Status, r.Body)
	}
}
