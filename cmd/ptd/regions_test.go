package main

import (
	"strings"
	"testing"
)

// TestRegionPeerFlag: --region-peer takes NAME=URL pairs of other regions
// and needs this ptd's own --region.
func TestRegionPeerFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		want    []string
	}{
		{"none", nil, "", nil},
		{"two peers", []string{"--region", "a", "--region-peer", "b=http://10.0.0.2:7070", "--region-peer", "c=https://c.example"}, "", []string{"a", "b", "c"}},
		{"no own region", []string{"--region-peer", "b=http://10.0.0.2:7070"}, "needs this ptd's own --region", nil},
		{"own region as a peer", []string{"--region", "a", "--region-peer", "a=http://10.0.0.2:7070"}, "names this ptd's own region", nil},
		{"twice", []string{"--region", "a", "--region-peer", "b=http://x:1", "--region-peer", "b=http://y:1"}, "given twice", nil},
		{"no URL", []string{"--region", "a", "--region-peer", "b"}, "NAME=URL", nil},
		{"not http", []string{"--region", "a", "--region-peer", "b=ftp://x"}, "http(s)", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig("ptd serve", tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := regionNames(c.region, c.regionPeers); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("regions %v, want %v", got, tc.want)
			}
		})
	}
}
