package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/image/imagetest"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// testImage is the busybox rootfs plus a layer exercising what unpacking
// must get right.
func testImage(t *testing.T) v1.Image {
	t.Helper()
	base := imagetest.DirLayer(t, busyboxDir(t))
	extra := imagetest.Layer(t,
		imagetest.Entry{Name: "opt/keep/a", Body: "a"},
		imagetest.Entry{Name: "opt/hide/old", Body: "old"},
		imagetest.Entry{Name: "etc/motd", Body: "hello\n"},
	)
	top := imagetest.Layer(t,
		// a whiteout and an opaque directory
		imagetest.Entry{Name: "etc/.wh.motd"},
		imagetest.Entry{Name: "opt/hide/", Type: tar.TypeDir},
		imagetest.Entry{Name: "opt/hide/.wh..wh..opq"},
		imagetest.Entry{Name: "opt/hide/new", Body: "new"},
		// hard links: inside the layer and to a lower layer's file
		imagetest.Entry{Name: "srv/one", Body: "same inode", UID: 1000, GID: 1000, Mode: 0o640},
		imagetest.Entry{Name: "srv/two", Type: tar.TypeLink, Link: "srv/one"},
		imagetest.Entry{Name: "srv/bb", Type: tar.TypeLink, Link: "bin/busybox"},
		// a symlink pointing outside the root filesystem: kept as a link,
		// resolved inside the sandbox at run time, never followed here
		imagetest.Entry{Name: "srv/outside", Type: tar.TypeSymlink, Link: "../../../../../../etc/shadow"},
		// setuid, a file capability and a user xattr; an overlay xattr a
		// layer must not be able to forge
		imagetest.Entry{Name: "usr/local/bin/suid", Body: "#!/bin/sh\n", Mode: 0o4755},
		imagetest.Entry{Name: "usr/local/bin/cap", Body: "cap", Mode: 0o755, PAX: map[string]string{
			"SCHILY.xattr.security.capability":    string(capNetBindService()),
			"SCHILY.xattr.user.origin":            "test",
			"SCHILY.xattr.trusted.overlay.opaque": "y",
		}},
		// device nodes are skipped; a fifo is kept
		imagetest.Entry{Name: "dev/fake", Type: tar.TypeChar},
		imagetest.Entry{Name: "srv/fifo", Type: tar.TypeFifo, Mode: 0o600},
	)
	return imagetest.Image(t, v1.Config{
		Env: []string{"PATH=/usr/local/bin:/bin", "GREETING=hi"}, User: "1000:1000", WorkingDir: "/srv",
		Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"echo up"},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}}, Labels: map[string]string{"org.example": "x"},
	}, base, extra, top)
}

// capNetBindService is a VFS v2 security.capability value granting
// CAP_NET_BIND_SERVICE (bit 10), permitted and effective.
func capNetBindService() []byte {
	b := make([]byte, 20)
	b[0], b[3] = 0x01, 0x02 // magic_etc 0x02000001 (little endian): revision 2, effective
	b[5] = 0x04             // permitted[0] = 1<<10
	return b
}

func TestPullFlatten(t *testing.T) {
	img := testImage(t)
	reg := imagetest.Registry(t, nil)
	ref := reg + "/team/app:v1"
	imagetest.Push(t, ref, img)
	s := newStore(t)
	var events []Event
	got, err := s.Pull(context.Background(), ref, Auth{}, func(e Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Env: []string{"PATH=/usr/local/bin:/bin", "GREETING=hi"}, User: "1000:1000", WorkingDir: "/srv",
		Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"echo up"}, ExposedPorts: []string{"8080/tcp"},
		Labels: map[string]string{"org.example": "x"}}
	if diff := cmp.Diff(want, got.Settings); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	if len(got.Layers) != 3 {
		t.Fatalf("layers = %v", got.Layers)
	}
	d, _ := img.Digest()
	if got.Digest != d.String() {
		t.Errorf("digest = %s, want %s", got.Digest, d)
	}
	done := 0
	for _, e := range events {
		if e.Done && !e.Cached && e.Bytes > 0 {
			done++
		}
	}
	if done != 3 {
		t.Errorf("layers reported done with bytes = %d, want 3: %+v", done, events)
	}
	dest := filepath.Join(t.TempDir(), "rootfs")
	if err := s.Flatten(context.Background(), dest, "", got.Layers); err != nil {
		t.Fatal(err)
	}
	checkRootfs(t, dest)

	// A second pull stores nothing new and fetches no layer.
	events = nil
	if _, err := s.Pull(context.Background(), ref, Auth{}, func(e Event) { events = append(events, e) }); err != nil {
		t.Fatal(err)
	}
	cached := 0
	for _, e := range events {
		if e.Cached {
			cached++
		}
	}
	if cached != 3 {
		t.Errorf("second pull: %d cached layers, want 3: %+v", cached, events)
	}
}

// checkRootfs checks a flattened testImage.
func checkRootfs(t *testing.T, dest string) {
	t.Helper()
	out, err := exec.Command("chroot", dest, "/bin/sh", "-c", "cat /opt/keep/a /opt/hide/new; ls /opt/hide; cat /srv/two").CombinedOutput()
	if err != nil {
		t.Fatalf("chroot: %v: %s", err, out)
	}
	if diff := cmp.Diff("anewnew\nsame inode", string(out)); diff != "" {
		t.Errorf("chroot output (-want +got):\n%s", diff)
	}
	for _, gone := range []string{"etc/motd", "opt/hide/old", "dev/fake"} {
		if _, err := os.Lstat(filepath.Join(dest, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want gone", gone, err)
		}
	}
	stat := func(p string) unix.Stat_t {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dest, p), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	one, two, bb, busybox := stat("srv/one"), stat("srv/two"), stat("srv/bb"), stat("bin/busybox")
	if one.Ino != two.Ino || bb.Ino != busybox.Ino {
		t.Errorf("hard links not kept: one %d two %d, bb %d busybox %d", one.Ino, two.Ino, bb.Ino, busybox.Ino)
	}
	if one.Uid != 1000 || one.Gid != 1000 || one.Mode&0o7777 != 0o640 {
		t.Errorf("srv/one: uid %d gid %d mode %o", one.Uid, one.Gid, one.Mode&0o7777)
	}
	if st := stat("usr/local/bin/suid"); st.Mode&0o7777 != 0o4755 {
		t.Errorf("suid mode = %o", st.Mode&0o7777)
	}
	if st := stat("srv/fifo"); st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Errorf("srv/fifo is not a fifo: %o", st.Mode)
	}
	if target, err := os.Readlink(filepath.Join(dest, "srv/outside")); err != nil || target != "../../../../../../etc/shadow" {
		t.Errorf("srv/outside → %q, %v", target, err)
	}
	capPath := filepath.Join(dest, "usr/local/bin/cap")
	buf := make([]byte, 64)
	if n, err := unix.Lgetxattr(capPath, "security.capability", buf); err != nil || string(buf[:n]) != string(capNetBindService()) {
		t.Errorf("file capability: %x, %v", buf[:max(n, 0)], err)
	}
	if n, err := unix.Lgetxattr(capPath, "user.origin", buf); err != nil || string(buf[:n]) != "test" {
		t.Errorf("user xattr: %q, %v", buf[:max(n, 0)], err)
	}
	if _, err := unix.Lgetxattr(capPath, "trusted.overlay.opaque", buf); err == nil {
		t.Error("a layer's trusted.overlay xattr reached the rootfs")
	}
	if _, err := unix.Lgetxattr(filepath.Join(dest, "opt/hide"), "trusted.overlay.opaque", buf); err == nil {
		t.Error("the opaque mark reached the rootfs")
	}
	if st := stat("."); st.Mode&0o7777 != 0o755 {
		t.Errorf("root mode = %o", st.Mode&0o7777)
	}
}

func TestSymlinkEscapeRefused(t *testing.T) {
	bb := busyboxDir(t)
	outside := t.TempDir()
	for _, tc := range []struct {
		name    string
		entries []imagetest.Entry
	}{
		{"file through a symlink to an absolute path", []imagetest.Entry{
			{Name: "evil", Type: tar.TypeSymlink, Link: outside},
			{Name: "evil/pwned", Body: "x"},
		}},
		{"file through a climbing symlink", []imagetest.Entry{
			{Name: "a/evil", Type: tar.TypeSymlink, Link: "../../../../../../../../.." + outside},
			{Name: "a/evil/pwned", Body: "x"},
		}},
		{"directory through a symlink", []imagetest.Entry{
			{Name: "evil", Type: tar.TypeSymlink, Link: outside},
			{Name: "evil/sub/", Type: tar.TypeDir},
		}},
		{"whiteout through a symlink", []imagetest.Entry{
			{Name: "evil", Type: tar.TypeSymlink, Link: outside},
			{Name: "evil/.wh.victim"},
		}},
		{"climbing name", []imagetest.Entry{{Name: "../../pwned", Body: "x"}}},
		{"climbing hard link", []imagetest.Entry{{Name: "l", Type: tar.TypeLink, Link: "../../../../etc/passwd"}}},
		{"hard link through a symlink", []imagetest.Entry{
			{Name: "evil", Type: tar.TypeSymlink, Link: "/etc"},
			{Name: "l", Type: tar.TypeLink, Link: "evil/passwd"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(filepath.Join(outside, "victim"), []byte("keep"), 0o644)
			img := imagetest.Image(t, v1.Config{}, imagetest.DirLayer(t, bb), imagetest.Layer(t, tc.entries...))
			reg := imagetest.Registry(t, nil)
			imagetest.Push(t, reg+"/evil:1", img)
			s := newStore(t)
			_, err := s.Pull(context.Background(), reg+"/evil:1", Auth{}, nil)
			if !errors.Is(err, ErrUnsafe) || !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Fatalf("pull = %v, want ErrUnsafe", err)
			}
			entries, _ := os.ReadDir(outside)
			if len(entries) != 1 || entries[0].Name() != "victim" {
				t.Errorf("outside dir changed: %v", entries)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "victim")); string(b) != "keep" {
				t.Errorf("victim = %q", b)
			}
			// The bad layer is not stored; the good one is.
			layers, _ := img.Layers()
			bad, _ := layers[1].DiffID()
			good, _ := layers[0].DiffID()
			if s.Has(bad.String()) || !s.Has(good.String()) {
				t.Errorf("has bad %v good %v", s.Has(bad.String()), s.Has(good.String()))
			}
			if tmp, _ := os.ReadDir(filepath.Join(s.cfg.Root, "tmp")); len(tmp) != 0 {
				t.Errorf("temporary files left: %v", tmp)
			}
		})
	}
}

func TestManifestListPicksLinuxAmd64(t *testing.T) {
	bb := imagetest.DirLayer(t, busyboxDir(t))
	amd := imagetest.Image(t, v1.Config{Env: []string{"ARCH=amd64"}}, bb)
	arm := imagetest.Image(t, v1.Config{Env: []string{"ARCH=arm64"}}, imagetest.Layer(t, imagetest.Entry{Name: "arm", Body: "x"}))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	reg := imagetest.Registry(t, nil)
	r, _ := name.ParseReference(reg + "/multi:latest")
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	s := newStore(t)
	got, err := s.Pull(context.Background(), reg+"/multi:latest", Auth{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ARCH=amd64"}, got.Settings.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	d, _ := amd.Digest()
	if got.Digest != d.String() {
		t.Errorf("digest %s, want the amd64 manifest's %s", got.Digest, d)
	}
	if rd, err := s.Resolve(context.Background(), reg+"/multi:latest", Auth{}); err != nil || rd.Digest != d.String() || rd.Settings.Env[0] != "ARCH=amd64" {
		t.Errorf("resolve = %+v, %v", rd, err)
	}
	// An index with no amd64 variant is refused.
	r2, _ := name.ParseReference(reg + "/armonly:1")
	remote.WriteIndex(r2, mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: arm,
		Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}}))
	if _, err := s.Pull(context.Background(), reg+"/armonly:1", Auth{}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("arm-only pull = %v, want ErrInvalid", err)
	}
}

func TestPullFailures(t *testing.T) {
	img := imagetest.Image(t, v1.Config{}, imagetest.DirLayer(t, busyboxDir(t)))
	layers, _ := img.Layers()
	layerDigest, _ := layers[0].Digest()
	const user, pass = "alice", "s3cret-pass"
	basicOK := func(r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		return ok && u == user && p == pass
	}
	for _, tc := range []struct {
		name string
		wrap func(http.Handler) http.Handler
		auth Auth
		ref  string
		want error // nil: the pull succeeds
	}{
		{name: "unknown repository", ref: "/nope:1", want: ErrNotFound},
		{name: "unknown tag", ref: "/app:nope", want: ErrNotFound},
		{name: "basic auth required, none given", wrap: basicAuth(basicOK), want: ErrUnauthorized},
		{name: "basic auth, wrong password", wrap: basicAuth(basicOK), auth: Auth{Username: user, Password: "wrong"}, want: ErrUnauthorized},
		{name: "basic auth", wrap: basicAuth(basicOK), auth: Auth{Username: user, Password: pass}},
		{name: "token auth, credentials exchanged", wrap: tokenAuth(basicOK), auth: Auth{Username: user, Password: pass}},
		{name: "token auth, none given", wrap: tokenAuth(basicOK), want: ErrUnauthorized},
		{name: "registry token", wrap: tokenAuth(basicOK), auth: Auth{Token: "tok-" + user}},
		{name: "corrupted layer blob", wrap: blobFault(func(w http.ResponseWriter, r *http.Request, next http.Handler) bool {
			if !strings.HasSuffix(r.URL.Path, layerDigest.String()) {
				return false
			}
			next.ServeHTTP(&corrupting{ResponseWriter: w}, r)
			return true
		}), want: ErrDigest},
		{name: "transient 503s are retried", wrap: func() func(http.Handler) http.Handler {
			var n atomic.Int32
			return blobFault(func(w http.ResponseWriter, r *http.Request, next http.Handler) bool {
				if n.Add(1) <= 2 {
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return true
				}
				return false
			})
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pushAuth []remote.Option
			if tc.wrap != nil {
				pushAuth = append(pushAuth, remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: user, Password: pass})))
			}
			reg := imagetest.Registry(t, tc.wrap)
			imagetest.Push(t, reg+"/app:1", img, pushAuth...)
			ref := tc.ref
			if ref == "" {
				ref = "/app:1"
			}
			s := newStore(t)
			got, err := s.Pull(context.Background(), reg+ref, tc.auth, nil)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("pull: %v", err)
				}
				if !s.Has(got.Layers[0]) {
					t.Error("layer not stored")
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("pull = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), pass) {
				t.Errorf("the error shows the password: %v", err)
			}
			if ls, _ := s.Layers(); len(ls) != 0 {
				t.Errorf("a failed pull stored layers: %v", ls)
			}
		})
	}
}

// basicAuth demands HTTP basic credentials that ok accepts.
func basicAuth(ok func(*http.Request) bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !ok(r) {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// tokenAuth is the registry token flow: /v2 answers 401 with a Bearer
// challenge whose realm (/token) trades basic credentials that ok accepts
// for a token; the registry takes only that token.
func tokenAuth(ok func(*http.Request) bool) func(http.Handler) http.Handler {
	const token = "tok-alice"
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/token" {
				if !ok(r) {
					http.Error(w, "denied", http.StatusUnauthorized)
					return
				}
				json.NewEncoder(w).Encode(map[string]string{"token": token})
				return
			}
			if r.Header.Get("Authorization") != "Bearer "+token && !ok(r) {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/token",service="test",scope="repository:app:pull"`, r.Host))
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"token required"}]}`, http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func TestPrivateRegistryRefusedByDefault(t *testing.T) {
	reg := imagetest.Registry(t, nil)
	s, err := Open(Config{Root: filepath.Join(t.TempDir(), "layers")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Resolve(context.Background(), reg+"/x:1", Auth{})
	if !errors.Is(err, ErrRegistry) || !strings.Contains(err.Error(), "private") {
		t.Fatalf("resolve on loopback = %v, want a refusal naming private addresses", err)
	}
}

func TestAuthNeverPrinted(t *testing.T) {
	a := Auth{Username: "bob", Password: "hunter2", Token: ""}
	for _, s := range []string{a.String(), fmt.Sprintf("%v %+v %#v %s", a, a, a, a), a.LogValue().String()} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("secret printed: %q", s)
		}
	}
	b := Auth{Token: "tok-xyz"}
	if s := fmt.Sprintf("%v %+v %#v", b, b, b); strings.Contains(s, "tok-xyz") {
		t.Errorf("token printed: %q", s)
	}
}
