package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/testenv"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestKeysOfASharedStore: a second ptd on a PostgreSQL store another ptd
// started first is refused while its data dir lacks the platform's keys
// (none at all, then keys of its own), with a message naming the first
// ptd's data dir and the join alternative, and it makes no key and no
// bridge; with the
// keys copied it starts, and a secret sealed through either ptd opens
// through the other: two webhooks, one created through each, both get the
// same event signed with their own secret by whichever ptd delivers.
func TestKeysOfASharedStore(t *testing.T) {
	requireEnv(t)
	_, err := pgtest.BinDir()
	testenv.Require(t, err == nil, fmt.Sprint(err))
	args := []string{"--pids-limit", "256", "--webhook-allow-private", "--webhook-retry-base", "200ms"}
	a := startNamed(t, "a", ptdtest.Options{Store: "postgres", ExtraArgs: args})
	// One admin token for both, so both act in one org.
	b, err := ptdtest.Start(ptdtest.Options{Store: "sqlite", Token: a.Token,
		ExtraArgs: append(append([]string{}, args...), "--store", a.StoreURL)})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ptd b:\n%s", b.Log())
		}
		if err := b.Stop(); err != nil {
			t.Errorf("ptd b: %v", err)
		}
	})
	refused := func(err error, what string) {
		t.Helper()
		if err == nil {
			t.Fatalf("b started; want it refused: %s", what)
		}
		for _, s := range []string{what, "first recorded from the data dir " + a.DataDir + " on ",
			"copy secrets.key and preview.key from that data dir", "ptd serve --role=host --join URL"} {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("b's refusal does not say %q:\n%v", s, err)
			}
		}
	}
	refused(err, b.DataDir+" has no secrets.key")
	if _, err := os.Stat(filepath.Join(b.DataDir, "secrets.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused ptd made a key of its own: %v", err)
	}
	// Keys of its own.
	for _, name := range []string{"secrets.key", "preview.key"} {
		key := make([]byte, 32)
		rand.Read(key)
		if err := os.WriteFile(filepath.Join(b.DataDir, name), key, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	refused(b.Restart(), filepath.Join(b.DataDir, "secrets.key")+" is not the platform's secrets.key")
	// Refused before it opened its host: no bridge was made.
	if err := exec.Command("ip", "link", "show", b.Bridge).Run(); err == nil {
		t.Fatalf("the refused ptd made its bridge %s", b.Bridge)
	}
	// The platform's keys, copied as operating.md says.
	if err := ptdtest.CopyKeys(a.DataDir, b.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := b.Restart(); err != nil {
		t.Fatalf("b with the platform's keys: %v", err)
	}

	// A webhook created through each ptd: its secret is sealed there.
	type delivery struct {
		path, sig string
		body      []byte
	}
	got := make(chan delivery, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- delivery{r.URL.Path, r.Header.Get("X-Pt-Signature"), body}
	}))
	defer srv.Close()
	secrets := map[string]string{}
	for name, d := range map[string]*ptdtest.Daemon{"/a": a, "/b": b} {
		st, m := callJSON(t, d, "POST", "/v1/webhooks", map[string]any{"url": srv.URL + name, "events": []string{"state_changed"}})
		if st != 201 {
			t.Fatalf("create webhook through %s: %d %v", name, st, m)
		}
		secrets[name] = m["secret"].(string)
	}
	st, m := callJSON(t, b, "POST", "/v1/sandboxes", map[string]any{"template": "busybox"})
	if st != 201 {
		t.Fatalf("create through b: %d %v", st, m)
	}
	id := m["id"].(string)
	t.Cleanup(func() { callJSON(t, b, "DELETE", "/v1/sandboxes/"+id, nil) })
	// Both webhooks get the sandbox's start, each signed with its secret.
	signed := map[string]bool{}
	for deadline := time.After(3 * time.Minute); len(signed) < 2; {
		var d delivery
		select {
		case d = <-got:
		case <-deadline:
			t.Fatalf("deliveries of %s's start signed with their secret: %v, want /a and /b", id, signed)
		}
		var e struct {
			SandboxID string `json:"sandbox_id"`
			Data      struct{ To string }
		}
		if json.Unmarshal(d.body, &e) != nil || e.SandboxID != id || e.Data.To != "running" {
			continue
		}
		if err := platinum.VerifyWebhook(secrets[d.path], d.sig, d.body, 0); err != nil {
			t.Fatalf("delivery to %s: %v", d.path, err)
		}
		signed[d.path] = true
	}
}

// callJSON sends body (JSON, when not nil) to d with d's admin token and
// decodes the answer.
func callJSON(t *testing.T, d *ptdtest.Daemon, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var js []byte
	if body != nil {
		js, _ = json.Marshal(body)
	}
	req, err := http.NewRequest(method, d.URL+path, bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}
