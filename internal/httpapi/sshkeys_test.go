package httpapi

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// testKey returns an authorized_keys line (with comment) and its
// fingerprint.
func testKey(t *testing.T, kind string) (line, fp string) {
	t.Helper()
	var pub any
	switch kind {
	case "ed25519":
		p, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pub = p
	case "rsa":
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		pub = &k.PublicKey
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " me@laptop", ssh.FingerprintSHA256(sp)
}

func fingerprints(m map[string]any) []string {
	var out []string
	for _, v := range m["ssh_key_fingerprints"].([]any) {
		out = append(out, v.(string))
	}
	return out
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestSSHKeys: ssh_keys at create and PATCH are parsed, stored, shown as
// fingerprints only, and a bad key is a 400 naming its index that
// changes nothing.
func TestSSHKeys(t *testing.T) {
	srv, _, tok := newServer(t)
	ed, edFP := testKey(t, "ed25519")
	rsaKey, rsaFP := testKey(t, "rsa")
	b64 := strings.Fields(ed)[1]

	resp, m := call(t, srv, tok, "POST", "/v1/sandboxes", toJSON(map[string]any{"template": "busybox", "ssh_keys": []string{ed, rsaKey, ed}}))
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %v", resp.StatusCode, m)
	}
	id := m["id"].(string)
	if got := fingerprints(m); len(got) != 2 || got[0] != edFP || got[1] != rsaFP {
		t.Errorf("create fingerprints %v, want [%s %s] (duplicates dropped, order kept)", got, edFP, rsaFP)
	}
	_, got := call(t, srv, tok, "GET", "/v1/sandboxes/"+id, "")
	if strings.Contains(toJSON(got), b64) || strings.Contains(toJSON(got), "ssh_keys\"") {
		t.Errorf("GET echoes a key: %v", got)
	}
	if fps := fingerprints(got); len(fps) != 2 {
		t.Errorf("GET fingerprints %v", fps)
	}
	_, list := call(t, srv, tok, "GET", "/v1/sandboxes", "")
	if strings.Contains(toJSON(list), b64) {
		t.Errorf("list echoes a key")
	}

	bad := []struct {
		name  string
		keys  any
		field string
	}{
		{"garbage", []string{ed, "not a key"}, "ssh_keys[1]"},
		{"truncated base64", []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9HMDu6"}, "ssh_keys[0]"},
		{"two lines", []string{ed + "\n" + rsaKey}, "ssh_keys[0]"},
		{"private key", []string{"-----BEGIN OPENSSH PRIVATE KEY-----"}, "ssh_keys[0]"},
		{"not strings", []int{1}, "ssh_keys"},
	}
	for _, tc := range bad {
		t.Run("create "+tc.name, func(t *testing.T) {
			_, before := call(t, srv, tok, "GET", "/v1/sandboxes", "")
			resp, m := call(t, srv, tok, "POST", "/v1/sandboxes", toJSON(map[string]any{"template": "busybox", "ssh_keys": tc.keys}))
			if resp.StatusCode != 400 || m["code"] != "invalid_request" || !strings.HasPrefix(m["field"].(string), tc.field) {
				t.Fatalf("%d %v, want 400 naming %s", resp.StatusCode, m, tc.field)
			}
			_, after := call(t, srv, tok, "GET", "/v1/sandboxes", "")
			if len(after["rows"].([]any)) != len(before["rows"].([]any)) {
				t.Errorf("a refused create made a sandbox")
			}
		})
		t.Run("patch "+tc.name, func(t *testing.T) {
			resp, m := call(t, srv, tok, "PATCH", "/v1/sandboxes/"+id, toJSON(map[string]any{"ssh_keys": tc.keys, "name": "renamed"}))
			if resp.StatusCode != 400 || !strings.HasPrefix(m["field"].(string), tc.field) {
				t.Fatalf("%d %v, want 400 naming %s", resp.StatusCode, m, tc.field)
			}
			_, got := call(t, srv, tok, "GET", "/v1/sandboxes/"+id, "")
			if fps := fingerprints(got); len(fps) != 2 || got["name"] != nil {
				t.Errorf("a refused patch changed the sandbox: %v", got)
			}
		})
	}

	resp, m = call(t, srv, tok, "PATCH", "/v1/sandboxes/"+id, toJSON(map[string]any{"ssh_keys": []string{rsaKey}}))
	if resp.StatusCode != 200 || strings.Join(fingerprints(m), ",") != rsaFP {
		t.Fatalf("patch replace: %d %v", resp.StatusCode, m)
	}
	resp, m = call(t, srv, tok, "PATCH", "/v1/sandboxes/"+id, `{"name":"kept"}`)
	if resp.StatusCode != 200 || strings.Join(fingerprints(m), ",") != rsaFP {
		t.Fatalf("patch without ssh_keys changed them: %d %v", resp.StatusCode, m)
	}
	for _, clear := range []string{`{"ssh_keys":null}`, `{"ssh_keys":[]}`} {
		call(t, srv, tok, "PATCH", "/v1/sandboxes/"+id, `{"ssh_keys":["`+ed+`"]}`)
		resp, m = call(t, srv, tok, "PATCH", "/v1/sandboxes/"+id, clear)
		if resp.StatusCode != 200 || len(fingerprints(m)) != 0 {
			t.Fatalf("patch %s: %d %v", clear, resp.StatusCode, m)
		}
	}
}
