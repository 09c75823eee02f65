package agent

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// account is a resolved sandbox user: who processes run as and whose home
// relative paths resolve against.
type account struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32
	home   string
}

// lookupAccount resolves name (the default user when empty) from
// /etc/passwd and /etc/group (passwd.go). Besides a user name it takes
// what an image's USER may say: a numeric uid, and either followed by
// ":group" (a name or a gid). A uid /etc/passwd does not list runs with
// gid 0 and home "/", as in Docker; so does root in an image without
// /etc/passwd (a shell-less image).
func (s *Server) lookupAccount(name string) (*account, error) {
	if name == "" {
		name, _ = s.defaults()
	}
	user, group, hasGroup := strings.Cut(name, ":")
	u, err := lookupPasswd(user, false)
	if err != nil && isNumeric(user) {
		if u, err = lookupPasswd(user, true); err != nil {
			u, err = passwdEntry{name: user, uid: user, gid: "0", home: "/"}, nil
		}
	}
	if err != nil && user == "root" {
		// root is uid 0 whatever /etc/passwd says: a sandbox that broke or
		// emptied the file (or an image without one) must still be reachable.
		u, err = passwdEntry{name: "root", uid: "0", gid: "0", home: "/root"}, nil
		if _, serr := os.Stat("/root"); serr != nil {
			u.home = "/"
		}
	}
	if err != nil {
		return nil, fmt.Errorf("user %q: %w", name, errUnauthorized)
	}
	if hasGroup {
		switch g, gerr := lookupGroup(group, false); {
		case gerr == nil:
			u.gid = g.gid
		case isNumeric(group):
			u.gid = group
		default:
			return nil, fmt.Errorf("user %q: no group %q: %w", name, group, errUnauthorized)
		}
	}
	uid, err1 := strconv.ParseUint(u.uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q: non-numeric ids: %w", name, errUnauthorized)
	}
	a := &account{name: u.name, uid: uint32(uid), gid: uint32(gid), home: u.home}
	if a.home == "" {
		a.home = "/"
	}
	a.groups = supplementaryGroups(u.name, a.gid)
	return a, nil
}

func isNumeric(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// requestUser returns the user named by "Authorization: Basic
// base64(user:)", or "" when the header is absent (the default user).
func requestUser(h http.Header) (string, error) {
	v := h.Get("Authorization")
	if v == "" {
		return "", nil
	}
	enc, ok := strings.CutPrefix(v, "Basic ")
	if !ok {
		return "", fmt.Errorf("authorization: not basic: %w", errUnauthorized)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", fmt.Errorf("authorization: %w", errUnauthorized)
	}
	name, _, _ := strings.Cut(string(raw), ":")
	return name, nil
}

func (s *Server) accountFor(h http.Header) (*account, error) {
	name, err := requestUser(h)
	if err != nil {
		return nil, err
	}
	return s.lookupAccount(name)
}

// resolvePath makes p absolute against home, expanding "~". Any ".."
// element is refused outright: the agent never guesses what a caller meant
// by climbing out of a directory.
func resolvePath(p, home string) (string, error) {
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", fmt.Errorf("path %q: contains '..': %w", p, errInvalidPath)
		}
	}
	switch {
	case p == "" || p == "~":
		p = home
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(home, p[2:])
	case !filepath.IsAbs(p):
		p = filepath.Join(home, p)
	}
	return filepath.Clean(p), nil
}

// defaultPath is the PATH a process gets unless the sandbox or call sets one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// buildEnv layers defaults, the sandbox env and the call's envs, later
// layers winning.
func buildEnv(a *account, sandbox, call map[string]string) []string {
	env := map[string]string{
		"PATH":    defaultPath,
		"HOME":    a.home,
		"USER":    a.name,
		"LOGNAME": a.name,
		"LANG":    "C.UTF-8",
	}
	for k, v := range sandbox {
		env[k] = v
	}
	for k, v := range call {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// lookPath finds cmd on the child's PATH (not the agent's).
func lookPath(cmd string, env []string) (string, error) {
	if strings.Contains(cmd, "/") {
		return cmd, nil
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		f := filepath.Join(dir, cmd)
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return f, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in PATH: %w", cmd, errInvalid)
}

// chown gives a path the account's ownership when the agent runs as root,
// so files a user uploads or creates are theirs.
func chown(path string, a *account) {
	if os.Geteuid() != 0 || a == nil || (int(a.uid) == os.Geteuid() && int(a.gid) == os.Getegid()) {
		return // already owned right; a no-op chown would still fire inotify IN_ATTRIB
	}
	_ = os.Lchown(path, int(a.uid), int(a.gid))
}

// mkdirAll is os.MkdirAll that chowns each directory it creates.
func mkdirAll(dir string, a *account) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory: %w", dir, errInvalid)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAll(parent, a); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if os.IsExist(err) {
			return nil
		}
		return err
	}
	chown(dir, a)
	return nil
}
