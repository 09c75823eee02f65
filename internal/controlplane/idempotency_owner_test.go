package controlplane

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestIdemClaimDead: a claim is taken over at once only when it names this
// host and a process that is gone (or this pid under another boot).
func TestIdemClaimDead(t *testing.T) {
	host := strings.Split(idemOwner, ":")[0]
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid // reaped: gone (unless reused in this instant)
	claim := func(h string, pid int, boot string) string {
		return h + ":" + strconv.Itoa(pid) + ":" + boot + "/" + randomToken()
	}
	tests := []struct {
		name  string
		claim string
		want  bool
	}{
		{"ours", idemOwner + "/" + randomToken(), false},
		{"legacy claim without an owner", randomToken(), false},
		{"another host", claim(host+"-other", dead, "b00t"), false},
		{"a live process of this host", claim(host, os.Getppid(), "b00t"), false},
		{"a dead process of this host", claim(host, dead, "b00t"), true},
		{"this pid, another boot", claim(host, os.Getpid(), "b00t"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := idemClaimDead(tc.claim); got != tc.want {
				t.Errorf("idemClaimDead(%q) = %v, want %v", tc.claim, got, tc.want)
			}
		})
	}
}
