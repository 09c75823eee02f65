package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sessions"
)

func TestPoolFlags(t *testing.T) {
	tests := []struct {
		args    []string
		want    poolFlags
		wantErr bool
	}{
		{[]string{"busybox=2"}, poolFlags{"busybox": {MinReady: 2, Max: 2}}, false},
		{[]string{"busybox=2:5", "pt-base=0:1"}, poolFlags{"busybox": {MinReady: 2, Max: 5}, "pt-base": {MinReady: 0, Max: 1}}, false},
		{[]string{"busybox=1", "busybox=3:4"}, poolFlags{"busybox": {MinReady: 3, Max: 4}}, false},
		{[]string{"busybox=1", "busybox@gvisor=2:3"}, poolFlags{"busybox": {MinReady: 1, Max: 1}, "busybox@gvisor": {MinReady: 2, Max: 3}}, false},
		{[]string{"busybox"}, nil, true},
		{[]string{"busybox@=2"}, nil, true},
		{[]string{"@gvisor=2"}, nil, true},
		{[]string{"=2"}, nil, true},
		{[]string{"busybox=-1"}, nil, true},
		{[]string{"busybox=3:2"}, nil, true},
		{[]string{"busybox=x:2"}, nil, true},
		{[]string{"busybox=0:3:auto", "busybox@gvisor=1:2"}, poolFlags{"busybox": {MinReady: 0, Max: 3, Auto: true}, "busybox@gvisor": {MinReady: 1, Max: 2}}, false},
		{[]string{"busybox=1:auto"}, nil, true},   // no max above min_ready
		{[]string{"busybox=2:2:auto"}, nil, true}, // nothing to size
		{[]string{"busybox=0:3:aut"}, nil, true},
	}
	for _, tc := range tests {
		got := poolFlags{}
		var err error
		for _, a := range tc.args {
			if err = got.Set(a); err != nil {
				break
			}
		}
		if tc.wantErr {
			if err == nil {
				t.Errorf("%v: no error, want one", tc.args)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(map[string]sessions.PoolSize(tc.want), map[string]sessions.PoolSize(got)); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tc.args, diff)
		}
	}
}
