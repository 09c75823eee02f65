package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/platinum-dev/platinum/internal/image/imagetest"
)

// tokenRegistry puts the registry token flow in front of a loopback
// registry: /v2 answers 401 with a Bearer challenge whose realm (/token on
// the same server) trades the right basic credentials for a token; blobs
// and manifests are served only for that token or for staticToken (a
// token the registry handed out before, as a CI token is). exchanges
// counts the trades.
func tokenRegistry(user, pass, staticToken string, exchanges *atomic.Int64) func(http.Handler) http.Handler {
	issued := "issued-" + randHex(8)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/token" {
				if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
					http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}`, http.StatusUnauthorized)
					return
				}
				exchanges.Add(1)
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]string{"token": issued})
				return
			}
			if a := r.Header.Get("Authorization"); a != "Bearer "+issued && a != "Bearer "+staticToken {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/token",service="test",scope="repository:private/app:pull"`, r.Host))
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"token required"}]}`, http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestTemplatePullWithOrgCredentials pulls from a loopback registry that
// wants the token flow: without credentials a create is refused with
// image_unauthorized and makes no version; an org's basic credentials
// are traded for a token and the pull works; credentials belong to one
// org (another org is still refused until it stores its own, here a
// registry token); wrong credentials are refused; no secret reaches
// ptd's log or its database in clear.
func TestTemplatePullWithOrgCredentials(t *testing.T) {
	c := newClient(t)
	const user = "puller"
	pass, static := "pw-"+randHex(12), "static-"+randHex(12)
	var exchanges atomic.Int64
	reg := imagetest.Registry(t, tokenRegistry(user, pass, static, &exchanges))
	host := strings.Split(reg, "/")[0]
	ref := reg + "/private/app:1"
	imagetest.Push(t, ref, appImage(t), remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: user, Password: pass})))
	slug := c.slugFor("private")

	refused := func(cl *client, why string) {
		t.Helper()
		r := cl.do("POST", "/v1/templates", map[string]any{"slug": slug, "from_image": ref})
		if r.Status != 403 || r.JSON()["code"] != "image_unauthorized" {
			t.Fatalf("%s: %d %s, want 403 image_unauthorized", why, r.Status, r.Body)
		}
		if r := cl.do("GET", "/v1/templates/"+slug, nil); r.Status != 404 {
			t.Fatalf("%s: the refused create left a template: %d %s", why, r.Status, r.Body)
		}
	}
	putCred := func(cl *client, body map[string]any) {
		t.Helper()
		if r := cl.do("PUT", "/v1/registry-credentials/"+host, body); r.Status != 200 {
			t.Fatalf("put credentials: %d %s", r.Status, r.Body)
		}
		t.Cleanup(func() { cl.do("DELETE", "/v1/registry-credentials/"+host, nil) })
	}

	refused(c, "no credentials")
	putCred(c, map[string]any{"username": user, "password": "wrong"})
	refused(c, "a wrong password")
	putCred(c, map[string]any{"username": user, "password": pass})
	before := exchanges.Load()
	b, lg := c.build(map[string]any{"slug": slug, "from_image": ref})
	t.Cleanup(func() { c.do("DELETE", "/v1/templates/"+slug, nil) })
	if exchanges.Load() == before {
		t.Errorf("the pull never traded the org's credentials for a token")
	}
	if len(lg.of("pull")) == 0 {
		t.Errorf("no pull progress in the log:\n%s", lg)
	}
	id := c.create(map[string]any{"template": slug})
	if got := c.mustSh(id, `cat /srv/one; echo; echo "$GREETING"`); got != "same inode\nhello from the image\n" {
		t.Errorf("sandbox from the private image: %q", got)
	}

	// The org's credentials are its own.
	other := newOrg(t, c)
	refused(other, "another org without credentials")
	putCred(other, map[string]any{"token": static})
	ob, _ := other.build(map[string]any{"slug": slug, "from_image": ref})
	t.Cleanup(func() { other.do("DELETE", "/v1/templates/"+slug, nil) })
	if ob["version_id"] == b["version_id"] {
		t.Errorf("the other org's build reused the first org's version")
	}
	if r := other.do("GET", "/v1/registry-credentials", nil); strings.Contains(string(r.Body), user) || strings.Contains(string(r.Body), static) {
		t.Errorf("the other org's list shows a username or the token: %s", r.Body)
	}

	for _, f := range []string{"ptd.log"} {
		data, err := os.ReadFile(filepath.Join(env.binDir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{pass, static} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s holds a registry secret", f)
			}
		}
	}
	for _, f := range []string{"platinum.db", "platinum.db-wal"} {
		data, err := os.ReadFile(filepath.Join(env.dataDir, f))
		if err != nil {
			continue // the store may be PostgreSQL, or the WAL checkpointed
		}
		for _, secret := range []string{pass, static} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s holds a registry secret in clear", f)
			}
		}
	}
}
