package agent

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestPasswdLookups(t *testing.T) {
	dir := t.TempDir()
	pw, gr := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	os.WriteFile(pw, []byte("# comment\nroot:x:0:0:root:/root:/bin/sh\n\nuser:x:1000:1000::/home/user:/bin/sh\nshort:x:5\n"), 0o644)
	os.WriteFile(gr, []byte("root:x:0:\nuser:x:1000:\nwheel:x:10:root,user\naudio:x:29:user\n"), 0o644)
	oldPw, oldGr := passwdFile, groupFile
	passwdFile, groupFile = pw, gr
	t.Cleanup(func() { passwdFile, groupFile = oldPw, oldGr })

	if e, err := lookupPasswd("user", false); err != nil || e.uid != "1000" || e.home != "/home/user" {
		t.Errorf("lookupPasswd(user) = %+v, %v", e, err)
	}
	if e, err := lookupPasswd("0", true); err != nil || e.name != "root" {
		t.Errorf("lookupPasswd(uid 0) = %+v, %v", e, err)
	}
	if _, err := lookupPasswd("short", false); err != errNoEntry {
		t.Errorf("malformed line matched: %v", err)
	}
	if g, err := lookupGroup("wheel", false); err != nil || g.gid != "10" {
		t.Errorf("lookupGroup(wheel) = %+v, %v", g, err)
	}
	for _, tc := range []struct {
		uid  uint32
		want string
	}{{0, "root"}, {1000, "user"}, {4242, "4242"}} {
		if got := userName(tc.uid); got != tc.want {
			t.Errorf("userName(%d) = %q, want %q", tc.uid, got, tc.want)
		}
	}
	if got := groupName(29); got != "audio" {
		t.Errorf("groupName(29) = %q", got)
	}
	if got := supplementaryGroups("user", 1000); !slices.Equal(got, []uint32{1000, 10, 29}) {
		t.Errorf("supplementaryGroups(user) = %v", got)
	}
}

// TestNoOSUser keeps os/user out of the agent: with cgo on it calls the C
// library, which pt-agent's static binary cannot use in a sandbox (see
// passwd.go and cmd/pt-agent/static_cgo.go).
func TestNoOSUser(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(pkg.Imports, "os/user") {
		t.Error("internal/agent imports os/user; resolve users with passwd.go")
	}
}

// TestRootWithoutPasswd: a sandbox that overwrote /etc/passwd still runs
// root's processes (uid 0); any other missing user stays refused.
func TestRootWithoutPasswd(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(pw, []byte("changed\n"), 0o644)
	old := passwdFile
	passwdFile = pw
	t.Cleanup(func() { passwdFile = old })
	s := &Server{}
	a, err := s.lookupAccount("root")
	if err != nil || a.uid != 0 || a.gid != 0 || a.home != "/root" {
		t.Fatalf("lookupAccount(root) = %+v, %v", a, err)
	}
	if _, err := s.lookupAccount("user"); err == nil {
		t.Fatal("a user absent from /etc/passwd resolved")
	}
}
