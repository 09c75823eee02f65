package e2e

import (
	"reflect"
	"strings"
	"testing"
)

// TestWarmCreateSSHKeys: on each runtime class, a create with ssh_keys
// and a ready pool of its class is served warm (docs/sessions.md, "Warm
// creates": the keys live only in the record, where the SSH gateway looks
// them up at each login, docs/terminal.md), and the real OpenSSH client
// logs in to it with that key and runs a command there, while a key given
// only to another warm sandbox is refused as any stranger's is. A cold
// create of the same body records the same keys and logs in the same way.
func TestWarmCreateSSHKeys(t *testing.T) {
	requireSSH(t)
	withEachClassPool(t, 2, warmSSHKeys)
}

// warmSSHKeys is TestWarmCreateSSHKeys on one runtime class.
func warmSSHKeys(t *testing.T, c *client, class string) {

	key, pub := sshKey(t, "owner")
	otherKey, otherPub := sshKey(t, "other")
	body := func(pub string) map[string]any {
		return map[string]any{"template": sessionTemplate, "runtime": class, "ssh_keys": []string{pub}}
	}
	warm := c.createRecord(body(pub))
	other := c.createRecord(body(otherPub))
	for _, sb := range []map[string]any{warm, other} {
		if sb["start"] != "warm" || sb["runtime"] != class {
			t.Fatalf("create with ssh_keys and a ready %s pool: start %v runtime %v, want warm: %v", class, sb["start"], sb["runtime"], sb)
		}
	}
	id, otherID := warm["id"].(string), other["id"].(string)

	login := func(t *testing.T, key, id string) {
		t.Helper()
		out, errOut, code := sshRun(t, key, id, "", "hostname; echo in")
		if code != 0 || out != id+"\nin\n" {
			t.Errorf("ssh %s with its key: code %d stdout %q stderr %q", id, code, out, errOut)
		}
	}
	refused := func(t *testing.T, key, id string) {
		t.Helper()
		out, errOut, code := sshRun(t, key, id, "", "echo in")
		if code != 255 || out != "" || !strings.Contains(errOut, "Permission denied (publickey)") {
			t.Errorf("ssh %s with another sandbox's key: code %d stdout %q stderr %q, want refused", id, code, out, errOut)
		}
	}
	login(t, key, id)
	login(t, otherKey, otherID)
	refused(t, otherKey, id)
	refused(t, key, otherID)

	drainClassPool(t, c, class)
	cold := c.createRecord(body(pub))
	if cold["start"] != "cold" {
		t.Fatalf("create with no pool: start %v, want cold", cold["start"])
	}
	if w, cv := warm["ssh_key_fingerprints"], cold["ssh_key_fingerprints"]; !reflect.DeepEqual(w, cv) || w == nil {
		t.Errorf("ssh_key_fingerprints: warm %v, cold %v", w, cv)
	}
	if got := c.do("GET", "/v1/sandboxes/"+id, nil).JSON()["ssh_key_fingerprints"]; !reflect.DeepEqual(got, warm["ssh_key_fingerprints"]) {
		t.Errorf("warm record read back: ssh_key_fingerprints %v, want %v", got, warm["ssh_key_fingerprints"])
	}
	login(t, key, cold["id"].(string))
	refused(t, otherKey, cold["id"].(string))
}
