package controlplane

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

func TestValidateNetwork(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    *sandbox.NetworkPolicy
		want  *sandbox.NetworkPolicy
		field string // the FieldError's field when invalid
	}{
		{"nil stays nil", nil, nil, ""},
		{"empty is allow", &sandbox.NetworkPolicy{}, &sandbox.NetworkPolicy{Egress: "allow", AllowOut: []string{}, DenyOut: []string{}}, ""},
		{"normalised", &sandbox.NetworkPolicy{Egress: "deny", AllowOut: []string{"10.1.2.3", "10.9.9.9/8", "API.Example.com.", "*.pypi.org"}, DenyOut: []string{"192.168.0.1/16"}},
			&sandbox.NetworkPolicy{Egress: "deny", AllowOut: []string{"10.1.2.3/32", "10.0.0.0/8", "api.example.com", "*.pypi.org"}, DenyOut: []string{"192.168.0.0/16"}}, ""},
		{"bad egress", &sandbox.NetworkPolicy{Egress: "block"}, nil, "network.egress"},
		{"ipv6", &sandbox.NetworkPolicy{AllowOut: []string{"::1/128"}}, nil, "network.allow_out"},
		{"bad domain", &sandbox.NetworkPolicy{AllowOut: []string{"exa mple.com"}}, nil, "network.allow_out"},
		{"wildcard in the middle", &sandbox.NetworkPolicy{AllowOut: []string{"api.*.com"}}, nil, "network.allow_out"},
		{"domain in deny_out", &sandbox.NetworkPolicy{DenyOut: []string{"example.com"}}, nil, "network.deny_out"},
		{"too many", &sandbox.NetworkPolicy{DenyOut: make([]string, MaxNetworkRules+1)}, nil, "network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ValidateNetwork(tc.in)
			if tc.field != "" {
				var fe *sandbox.FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sandbox.ErrInvalidArgument) {
					t.Fatalf("err = %v, want a FieldError on %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// netHost is a fake host that records the network specs it is given.
type netHost struct {
	*fakeHost
	mu     sync.Mutex
	starts map[string]*NetworkSpec
	sets   map[string]*NetworkSpec
}

var _ NetworkSetter = (*netHost)(nil)

func (h *netHost) Start(ctx context.Context, spec StartSpec) (Instance, error) {
	h.mu.Lock()
	h.starts[spec.ID] = spec.Network
	h.mu.Unlock()
	return h.fakeHost.Start(ctx, spec)
}

func (h *netHost) SetNetwork(ctx context.Context, id string, spec *NetworkSpec) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sets[id] = spec
	return nil
}

func (h *netHost) last(m map[string]*NetworkSpec, id string) (*NetworkSpec, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := m[id]
	return s, ok
}

// plainSealer "seals" by prefixing: enough to see what the host is given.
type plainSealer struct{}

func (plainSealer) Seal(p, aad string) string { return "sealed:" + aad + ":" + p }
func (plainSealer) Open(s, aad string) (string, error) {
	v, ok := strings.CutPrefix(s, "sealed:"+aad+":")
	if !ok {
		return "", errors.New("bad seal")
	}
	return v, nil
}

func newNetService(t *testing.T) (*Service, *netHost) {
	t.Helper()
	h := &netHost{fakeHost: &fakeHost{}, starts: map[string]*NetworkSpec{}, sets: map[string]*NetworkSpec{}}
	s, _ := newServiceWith(t, h, "", func(cfg *Config) { cfg.Sealer = plainSealer{} })
	return s, h
}

func TestSetNetwork(t *testing.T) {
	s, h := newNetService(t)
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox",
		Network: &sandbox.NetworkPolicy{Egress: "deny", AllowOut: []string{"10.0.0.1"}},
		Secrets: map[string]SecretInput{"KEY": {Value: "v1", Hosts: []string{"API.example.com"}, Body: true}}})
	spec, _ := h.last(h.starts, sb.ID)
	if spec == nil || spec.Policy.Egress != "deny" || !cmp.Equal(spec.Policy.AllowOut, []string{"10.0.0.1/32"}) {
		t.Fatalf("start spec network = %+v", spec)
	}
	wantSecret := []SecretSpec{{Name: "KEY", Placeholder: sb.Secrets["KEY"].Placeholder, Value: "v1", Hosts: []string{"api.example.com"}, Body: true}}
	if diff := cmp.Diff(wantSecret, spec.Secrets); diff != "" {
		t.Errorf("start spec secrets (-want +got):\n%s", diff)
	}

	// Running: applied at once and stored.
	res, err := s.SetNetwork(ctx, org, sb.ID, &sandbox.NetworkPolicy{DenyOut: []string{"10.0.0.0/8"}})
	if err != nil || res.Applies != "now" {
		t.Fatalf("set network on running: %+v %v", res, err)
	}
	if got, ok := h.last(h.sets, sb.ID); !ok || !cmp.Equal(got.Policy.DenyOut, []string{"10.0.0.0/8"}) || got.Policy.Egress != "allow" {
		t.Errorf("host got %+v", got)
	}
	if got, _ := s.Get(ctx, org, sb.ID, false); !cmp.Equal(got.Network.DenyOut, []string{"10.0.0.0/8"}) {
		t.Errorf("stored policy %+v", got.Network)
	}

	// A bad policy changes nothing.
	if _, err := s.SetNetwork(ctx, org, sb.ID, &sandbox.NetworkPolicy{Egress: "maybe"}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("bad policy: %v", err)
	}
	if got, _ := s.Get(ctx, org, sb.ID, false); got.Network.Egress != "allow" {
		t.Errorf("a rejected policy changed the record: %+v", got.Network)
	}
	// Another org's sandbox is not found.
	if _, err := s.SetNetwork(ctx, Principal{OrgID: "org_b"}, sb.ID, &sandbox.NetworkPolicy{}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("other org: %v", err)
	}

	// Stopped: stored, applied by the next start.
	s.Stop(ctx, org, sb.ID)
	s.WaitFor(ctx, org, sb.ID, sandbox.StateStopped, 5*time.Second)
	h.mu.Lock()
	delete(h.sets, sb.ID)
	h.mu.Unlock()
	res, err = s.SetNetwork(ctx, org, sb.ID, &sandbox.NetworkPolicy{Egress: "deny"})
	if err != nil || res.Applies != "next_start" {
		t.Fatalf("set network on stopped: %+v %v", res, err)
	}
	if _, ok := h.last(h.sets, sb.ID); ok {
		t.Errorf("a stopped sandbox's host was asked to apply a policy")
	}
	s.Start(ctx, org, sb.ID)
	s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if spec, _ := h.last(h.starts, sb.ID); spec == nil || spec.Policy.Egress != "deny" {
		t.Errorf("restart spec network = %+v, want deny", spec)
	}
}

func TestChildrenGetTheParentsNetwork(t *testing.T) {
	s, _ := newNetService(t)
	ctx := context.Background()
	deny := &sandbox.NetworkPolicy{Egress: "deny", AllowOut: []string{"api.example.com"}}
	parent := running(t, s, CreateRequest{Template: "busybox", Network: deny})
	asParent := Principal{OrgID: org.OrgID, Role: org.Role, SandboxID: parent.ID}

	child, err := s.Create(ctx, asParent, CreateRequest{Template: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if child.Network == nil || child.Network.Egress != "deny" || !cmp.Equal(child.Network.AllowOut, []string{"api.example.com"}) {
		t.Errorf("child's policy = %+v, want the parent's", child.Network)
	}
	if _, err := s.Create(ctx, asParent, CreateRequest{Template: "busybox", Network: &sandbox.NetworkPolicy{Egress: "allow"}}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("child asking for a wider policy: %v", err)
	}
	s.WaitFor(ctx, org, child.ID, sandbox.StateRunning, 5*time.Second)
	if _, err := s.SetNetwork(ctx, asParent, child.ID, &sandbox.NetworkPolicy{}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("parent widening its child: %v", err)
	}
	// The org's own token may set any policy.
	if _, err := s.SetNetwork(ctx, org, child.ID, &sandbox.NetworkPolicy{}); err != nil {
		t.Errorf("org admin: %v", err)
	}
}

// TestReconcileReappliesNetwork: after a restart the host's egress proxy is
// empty, so the startup reconcile hands every running sandbox's network to
// the host again.
func TestReconcileReappliesNetwork(t *testing.T) {
	s, h := newNetService(t)
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox", Network: &sandbox.NetworkPolicy{Egress: "deny"}})
	if _, ok := h.last(h.sets, sb.ID); ok {
		t.Fatal("SetNetwork called before any reconcile")
	}
	if err := s.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if spec, ok := h.last(h.sets, sb.ID); ok {
			if spec == nil || spec.Policy.Egress != "deny" {
				t.Errorf("reapplied %+v, want the stored deny policy", spec)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the startup reconcile never reapplied the running sandbox's network")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
