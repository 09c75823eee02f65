package agent

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
)

// The agent resolves users and groups by reading /etc/passwd and
// /etc/group itself instead of through os/user. With cgo on (a plain `go
// build` where gcc exists) os/user calls the C library's getpwnam_r, which
// in pt-agent's static binary (cmd/pt-agent/static_cgo.go) would need the
// C library's NSS modules at run time — modules a busybox sandbox does not
// have, and that must match the build machine's C library when a template
// has them. Reading the files is what os/user does in a pure-Go build.

// errNoEntry reports a name or id absent from /etc/passwd or /etc/group.
var errNoEntry = errors.New("no such entry")

// passwdFile and groupFile are variables so tests can point them at
// fixtures.
var (
	passwdFile = "/etc/passwd"
	groupFile  = "/etc/group"
)

// passwdEntry is one line of /etc/passwd.
type passwdEntry struct {
	name, uid, gid, home string
}

// groupEntry is one line of /etc/group.
type groupEntry struct {
	name, gid string
	members   []string
}

// scanColon calls fn with the colon-separated fields of each line of path
// that is not empty or a comment, until fn returns true.
func scanColon(path string, fn func(f []string) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
			continue
		}
		if fn(strings.Split(line, ":")) {
			return nil
		}
	}
	return sc.Err()
}

// lookupPasswd returns the first /etc/passwd entry whose name (byID false)
// or uid (byID true) is key.
func lookupPasswd(key string, byID bool) (passwdEntry, error) {
	return lookupColon(passwdFile, 6, key, byID, func(f []string) passwdEntry {
		return passwdEntry{name: f[0], uid: f[2], gid: f[3], home: f[5]}
	})
}

// lookupGroup returns the first /etc/group entry whose name (byID false)
// or gid (byID true) is key.
func lookupGroup(key string, byID bool) (groupEntry, error) {
	return lookupColon(groupFile, 3, key, byID, func(f []string) groupEntry {
		e := groupEntry{name: f[0], gid: f[2]}
		if len(f) > 3 && f[3] != "" {
			e.members = strings.Split(f[3], ",")
		}
		return e
	})
}

// lookupColon returns entry of the first line of path with at least
// minFields fields whose name (byID false) or numeric id (byID true) is
// key, else errNoEntry. /etc/passwd and /etc/group both keep the name in
// field 0 and the id in field 2.
func lookupColon[T any](path string, minFields int, key string, byID bool, entry func(f []string) T) (T, error) {
	var out T
	found := false
	err := scanColon(path, func(f []string) bool {
		if len(f) < minFields {
			return false
		}
		if (byID && f[2] == key) || (!byID && f[0] == key) {
			out, found = entry(f), true
		}
		return found
	})
	if err == nil && !found {
		err = errNoEntry
	}
	return out, err
}

// userName returns the name of uid, or its number when it has none.
func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if e, err := lookupPasswd(id, true); err == nil {
		return e.name
	}
	return id
}

// groupName returns the name of gid, or its number when it has none.
func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if e, err := lookupGroup(id, true); err == nil {
		return e.name
	}
	return id
}

// supplementaryGroups returns the gids of the groups listing user as a
// member, plus its primary gid, as getgrouplist(3) does.
func supplementaryGroups(user string, primary uint32) []uint32 {
	out := []uint32{primary}
	seen := map[uint32]bool{primary: true}
	scanColon(groupFile, func(f []string) bool {
		if len(f) < 4 || f[3] == "" {
			return false
		}
		for _, m := range strings.Split(f[3], ",") {
			if m != user {
				continue
			}
			if n, err := strconv.ParseUint(f[2], 10, 32); err == nil && !seen[uint32(n)] {
				seen[uint32(n)] = true
				out = append(out, uint32(n))
			}
		}
		return false
	})
	return out
}
