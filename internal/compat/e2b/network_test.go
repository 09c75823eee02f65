package e2b

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

func TestNetworkPolicyFromE2B(t *testing.T) {
	for _, tc := range []struct {
		body string
		want *sandbox.NetworkPolicy
	}{
		{`{"templateID":"base"}`, nil},
		{`{"templateID":"base","allow_internet_access":true}`, nil},
		{`{"templateID":"base","allow_internet_access":false}`, &sandbox.NetworkPolicy{Egress: "deny"}},
		{`{"templateID":"base","network":{"allowOut":["api.example.com"],"denyOut":["0.0.0.0/0"]}}`,
			&sandbox.NetworkPolicy{Egress: "allow", AllowOut: []string{"api.example.com"}, DenyOut: []string{"0.0.0.0/0"}}},
		{`{"templateID":"base","allow_internet_access":false,"network":{"allowOut":["10.0.0.0/8"]}}`,
			&sandbox.NetworkPolicy{Egress: "deny", AllowOut: []string{"10.0.0.0/8"}}},
	} {
		var n newSandbox
		if err := json.Unmarshal([]byte(tc.body), &n); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, n.networkPolicy()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.body, diff)
		}
	}
}
