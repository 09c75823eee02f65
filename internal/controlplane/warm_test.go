package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// pooledSandbox makes a running, claimable sandbox of a busybox warm pool.
func pooledSandbox(t *testing.T, s *Service, st store.Store) sandbox.Sandbox {
	t.Helper()
	return pooledSandboxSized(t, s, st, nil)
}

// pooledSandboxSized is pooledSandbox with its disk_gb (nil: the default).
func pooledSandboxSized(t *testing.T, s *Service, st store.Store, diskGB *int) sandbox.Sandbox {
	t.Helper()
	return pooledSandboxOf(t, s, st, CreateRequest{DiskGB: diskGB})
}

// pooledSandboxOf makes a running, claimable busybox sandbox of r's
// runtime class's pool, sized as r asks (the pool loop's create, with r's
// runtime and size).
func pooledSandboxOf(t *testing.T, s *Service, st store.Store, r CreateRequest) sandbox.Sandbox {
	t.Helper()
	ctx := t.Context()
	if err := st.CreateOrg(ctx, store.Org{ID: PoolOrgID, Name: "warm pools", CreatedAt: time.Now().UTC()}); err != nil && !errors.Is(err, store.ErrConflict) {
		t.Fatal(err)
	}
	pool := Principal{OrgID: PoolOrgID, Role: store.RoleAdmin}
	zero := 0
	class, err := s.PoolRuntime(r.Runtime)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := s.CreatePlatform(ctx, pool, CreateRequest{Template: "busybox", Type: sandbox.TypeEphemeral, AutoStopMinutes: &zero,
		Runtime: r.Runtime, CPU: r.CPU, RAMMB: r.RAMMB, DiskGB: r.DiskGB,
		Metadata: map[string]string{store.MetaPool: store.PoolKey("busybox", class)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.WaitFor(ctx, pool, sb.ID, sandbox.StateRunning, 5*time.Second); err != nil || !ok {
		t.Fatalf("pooled sandbox not running: %v", err)
	}
	if ok, err := s.SetPlatformMetadata(ctx, PoolOrgID, sb.ID, store.MetaPoolReady, "1", sandbox.StateRunning); err != nil || !ok {
		t.Fatalf("mark ready: %v %v", ok, err)
	}
	return sb
}

// TestWarmCreate: a create that asks for nothing a boot must apply is
// handed the pool's running sandbox with its own record, once; a create
// whose ram_mb is below the pooled boot's (a live shrink goes no lower)
// boots cold and leaves the pool alone; a
// refused claim discards the sandbox rather than returning it to the
// pool. Secrets, a network policy and a bigger disk are applied to the
// claimed sandbox (the host's SetNetwork and GrowDisk) and recorded as a
// cold create of the same body records them; a failure to apply them
// discards the sandbox and boots cold, and a host that cannot change a
// running sandbox's network boots such creates cold.
func TestWarmCreate(t *testing.T) {
	ctx := context.Background()
	s, st := newTestService(t, &fakeHost{})
	pooled := pooledSandbox(t, s, st)

	ram := sandbox.DefaultRAM / 2
	cold, err := s.Create(ctx, org, CreateRequest{Template: "busybox", RAMMB: &ram})
	if err != nil {
		t.Fatal(err)
	}
	if cold.ID == pooled.ID || cold.Start != sandbox.StartCold || cold.State != sandbox.StateCreating {
		t.Fatalf("a create of another size = %s %s %s, want a cold create", cold.ID, cold.Start, cold.State)
	}

	ttl := int64(60_000)
	warm, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Name: "w1", TTLMs: &ttl,
		Env: map[string]string{"A": "1"}, Metadata: map[string]string{"team": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if warm.ID != pooled.ID || warm.Start != sandbox.StartWarm || warm.State != sandbox.StateRunning || warm.OrgID != org.OrgID ||
		warm.Name != "w1" || warm.Env["A"] != "1" || warm.Metadata["team"] != "x" || len(warm.Metadata) != 1 ||
		warm.ExpiresAt == nil || warm.ProjectID == "" || !warm.CreatedAt.After(pooled.CreatedAt) {
		t.Fatalf("warm create = %+v", warm)
	}
	if got, err := s.Get(ctx, org, warm.ID, false); err != nil || got.Start != sandbox.StartWarm || got.Name != "w1" {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	if _, err := st.GetSandbox(ctx, PoolOrgID, pooled.ID); !store.IsNotFound(err) {
		t.Errorf("the pool still holds the claimed sandbox: %v", err)
	}
	evs, err := st.ListEvents(ctx, store.EventQuery{OrgID: org.OrgID, SandboxID: warm.ID})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if len(types) != 2 || types[0] != store.EventStateChanged || types[1] != "created" {
		t.Errorf("the caller's events = %v, want a state change to running and created", types)
	}

	again, err := s.Create(ctx, org, CreateRequest{Template: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if again.ID == pooled.ID || again.Start != sandbox.StartCold {
		t.Errorf("the pool's one sandbox was handed out twice: %s %s", again.ID, again.Start)
	}

	t.Run("a taken name discards the claimed sandbox", func(t *testing.T) {
		p2 := pooledSandbox(t, s, st)
		_, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Name: "w1"})
		if !errors.Is(err, sandbox.ErrConflict) {
			t.Fatalf("create under a taken name: %v, want a conflict", err)
		}
		back, err := st.GetSandbox(ctx, PoolOrgID, p2.ID)
		if err != nil || back.Metadata[store.MetaPoolReady] == "1" || (back.State != sandbox.StateDeleting && back.State != sandbox.StateDeleted) {
			t.Errorf("pooled sandbox after a refused claim: %v %+v", err, back)
		}
	})
	t.Run("without a host that sets networks in place, a policy boots cold", func(t *testing.T) {
		p3 := pooledSandbox(t, s, st)
		got, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Network: &sandbox.NetworkPolicy{Egress: sandbox.EgressDeny}})
		if err != nil {
			t.Fatal(err)
		}
		if got.ID == p3.ID || got.Start != sandbox.StartCold {
			t.Errorf("a create with a policy on a host without NetworkSetter = %s %s, want cold", got.ID, got.Start)
		}
		if back, err := st.GetSandbox(ctx, PoolOrgID, p3.ID); err != nil || back.Metadata[store.MetaPoolReady] != "1" {
			t.Errorf("the pool lost its sandbox to a create it cannot serve: %v %+v", err, back.Metadata)
		}
	})

	t.Run("secrets, a policy and a bigger disk are applied at claim", func(t *testing.T) {
		testWarmCreateSettings(t)
	})
}

// warmHost is a host that sets networks in place and grows disks, and
// records both.
type warmHost struct {
	*netHost
	growMu sync.Mutex
	grows  map[string]int
}

func (h *warmHost) GrowDisk(ctx context.Context, id string, newGB int) error {
	if err := h.fakeHost.GrowDisk(ctx, id, newGB); err != nil {
		return err
	}
	h.growMu.Lock()
	defer h.growMu.Unlock()
	h.grows[id] = newGB
	return nil
}

func (h *warmHost) grown(id string) int {
	h.growMu.Lock()
	defer h.growMu.Unlock()
	return h.grows[id]
}

// failNetHost is a warmHost whose SetNetwork fails.
type failNetHost struct{ *warmHost }

func (h *failNetHost) SetNetwork(ctx context.Context, id string, spec *NetworkSpec) error {
	return errors.New("no room in the filter")
}

func newWarmHost() *warmHost {
	return &warmHost{netHost: &netHost{fakeHost: &fakeHost{}, starts: map[string]*NetworkSpec{}, sets: map[string]*NetworkSpec{}}, grows: map[string]int{}}
}

func testWarmCreateSettings(t *testing.T) {
	ctx := context.Background()
	h := newWarmHost()
	s, st := newServiceWith(t, h, "", func(cfg *Config) { cfg.Sealer = plainSealer{} })
	parent := running(t, s, CreateRequest{Template: "busybox"})
	pooled := pooledSandbox(t, s, st)
	bigger := pooled.DiskGB + 3
	body := func(name string) CreateRequest {
		return CreateRequest{Template: "busybox", Name: name, ParentID: parent.ID, DiskGB: &bigger,
			Env:      map[string]string{"GREETING": "hi"},
			Metadata: map[string]string{"suite": "warm"},
			Secrets:  map[string]SecretInput{"API_KEY": {Value: "sk-value", Hosts: []string{"API.example.test"}}},
			Network:  &sandbox.NetworkPolicy{Egress: sandbox.EgressDeny, AllowOut: []string{"10.9.8.7"}}}
	}

	warm, err := s.Create(ctx, org, body("warm"))
	if err != nil {
		t.Fatal(err)
	}
	if warm.ID != pooled.ID || warm.Start != sandbox.StartWarm || warm.State != sandbox.StateRunning {
		t.Fatalf("create with secrets, a policy and a bigger disk = %s %s %s, want the pooled sandbox, warm", warm.ID, warm.Start, warm.State)
	}
	// The host got the caller's policy and secrets for the claimed
	// sandbox, and its disk grew to the caller's size.
	spec, ok := h.last(h.sets, warm.ID)
	if !ok || spec == nil || spec.Policy.Egress != sandbox.EgressDeny || !slices.Equal(spec.Policy.AllowOut, []string{"10.9.8.7/32"}) ||
		len(spec.Secrets) != 1 || spec.Secrets[0].Value != "sk-value" || spec.Secrets[0].Placeholder != warm.Secrets["API_KEY"].Placeholder {
		t.Fatalf("network spec applied at claim = %+v (set %v)", spec, ok)
	}
	if g := h.grown(warm.ID); g != bigger {
		t.Errorf("disk grown to %d at claim, want %d", g, bigger)
	}
	// The secret is sealed for the sandbox it is in.
	if v, err := (plainSealer{}).Open(warm.Secrets["API_KEY"].Sealed, warm.ID+"/API_KEY"); err != nil || v != "sk-value" {
		t.Errorf("warm secret sealed for another sandbox: %q %v", v, err)
	}
	if env := s.sandboxEnv(warm); env["API_KEY"] != warm.Secrets["API_KEY"].Placeholder || env["GREETING"] != "hi" {
		t.Errorf("the warm guest's env = %v", env)
	}

	// A cold create of the same body (the pool is empty now) records
	// the same.
	cold := running(t, s, body("cold"))
	if cold.Start != sandbox.StartCold {
		t.Fatalf("second create: start %s, want cold", cold.Start)
	}
	coldSpec, _ := h.last(h.starts, cold.ID)
	w, err := s.Get(ctx, org, warm.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if w.DiskGB != bigger || w.DiskGB != cold.DiskGB || w.CPU != cold.CPU || w.RAMMB != cold.RAMMB {
		t.Errorf("sizes: warm %g/%d/%d, cold %g/%d/%d", w.CPU, w.RAMMB, w.DiskGB, cold.CPU, cold.RAMMB, cold.DiskGB)
	}
	if !reflect.DeepEqual(w.Network, cold.Network) || w.Network == nil {
		t.Errorf("network: warm %+v, cold %+v", w.Network, cold.Network)
	}
	if !slices.Equal(slices.Sorted(maps.Keys(w.Secrets)), slices.Sorted(maps.Keys(cold.Secrets))) ||
		w.Secrets["API_KEY"].Placeholder == "" || !slices.Equal(w.Secrets["API_KEY"].Hosts, cold.Secrets["API_KEY"].Hosts) {
		t.Errorf("secrets: warm %+v, cold %+v", w.Secrets, cold.Secrets)
	}
	if coldSpec == nil || !reflect.DeepEqual(coldSpec.Policy, spec.Policy) || len(coldSpec.Secrets) != 1 || coldSpec.Secrets[0].Value != spec.Secrets[0].Value ||
		!slices.Equal(coldSpec.Secrets[0].Hosts, spec.Secrets[0].Hosts) {
		t.Errorf("what the host got: warm %+v, cold %+v", spec, coldSpec)
	}
	if w.ParentID != parent.ID || w.ParentID != cold.ParentID || w.ProjectID != cold.ProjectID ||
		!maps.Equal(w.Env, cold.Env) || !maps.Equal(w.Metadata, cold.Metadata) || w.Retention != cold.Retention {
		t.Errorf("record: warm %+v, cold %+v", w, cold)
	}

	t.Run("a smaller disk than the pool's boots cold", func(t *testing.T) {
		big := pooled.DiskGB + 1
		p := pooledSandboxSized(t, s, st, &big)
		got, err := s.Create(ctx, org, CreateRequest{Template: "busybox"})
		if err != nil {
			t.Fatal(err)
		}
		if got.ID == p.ID || got.Start != sandbox.StartCold || got.DiskGB != pooled.DiskGB {
			t.Errorf("a create smaller than the pool's disk = %s %s %d GB, want cold", got.ID, got.Start, got.DiskGB)
		}
		s.Delete(ctx, Principal{OrgID: PoolOrgID, Role: store.RoleAdmin}, p.ID)
	})

	t.Run("a child its parent's token creates gets the parent's policy, warm", func(t *testing.T) {
		deny := &sandbox.NetworkPolicy{Egress: sandbox.EgressDeny, AllowOut: []string{"api.example.com"}}
		restricted := running(t, s, CreateRequest{Template: "busybox", Network: deny})
		p := pooledSandbox(t, s, st)
		asParent := Principal{OrgID: org.OrgID, Role: org.Role, SandboxID: restricted.ID}
		child, err := s.Create(ctx, asParent, CreateRequest{Template: "busybox"})
		if err != nil {
			t.Fatal(err)
		}
		if child.ID != p.ID || child.Start != sandbox.StartWarm || child.Network == nil || child.Network.Egress != sandbox.EgressDeny {
			t.Fatalf("child = %s %s %+v, want the pooled sandbox with the parent's policy", child.ID, child.Start, child.Network)
		}
		if spec, _ := h.last(h.sets, child.ID); spec == nil || spec.Policy.Egress != sandbox.EgressDeny ||
			!slices.Equal(spec.Policy.AllowOut, []string{"api.example.com"}) {
			t.Errorf("the host got %+v for the warm child, want the parent's policy", spec)
		}
	})

	discarded := func(t *testing.T, id string) {
		t.Helper()
		back, err := st.GetSandbox(ctx, PoolOrgID, id)
		if err != nil || back.Metadata[store.MetaPoolReady] == "1" || (back.State != sandbox.StateDeleting && back.State != sandbox.StateDeleted) {
			t.Errorf("pooled sandbox after a failed claim: %v %+v", err, back)
		}
	}
	t.Run("a disk that cannot grow discards the claimed sandbox and boots cold", func(t *testing.T) {
		p := pooledSandbox(t, s, st)
		h.GrowErr = errors.New("no space")
		defer func() { h.GrowErr = nil }()
		got, err := s.Create(ctx, org, CreateRequest{Template: "busybox", DiskGB: &bigger})
		if err != nil {
			t.Fatal(err)
		}
		if got.ID == p.ID || got.Start != sandbox.StartCold {
			t.Errorf("create after a failed grow = %s %s, want cold", got.ID, got.Start)
		}
		discarded(t, p.ID)
	})

	t.Run("a policy the host refuses discards the claimed sandbox and boots cold", func(t *testing.T) {
		fh := &failNetHost{warmHost: newWarmHost()}
		s, st := newServiceWith(t, fh, "", func(cfg *Config) { cfg.Sealer = plainSealer{} })
		p := pooledSandbox(t, s, st)
		got, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Network: &sandbox.NetworkPolicy{Egress: sandbox.EgressDeny}})
		if err != nil {
			t.Fatal(err)
		}
		if got.ID == p.ID || got.Start != sandbox.StartCold || got.Network == nil || got.Network.Egress != sandbox.EgressDeny {
			t.Errorf("create after a refused policy = %s %s %+v, want cold with the policy", got.ID, got.Start, got.Network)
		}
		back, err := st.GetSandbox(ctx, PoolOrgID, p.ID)
		if err != nil || back.Metadata[store.MetaPoolReady] == "1" || (back.State != sandbox.StateDeleting && back.State != sandbox.StateDeleted) {
			t.Errorf("pooled sandbox after a refused policy: %v %+v", err, back)
		}
	})
}

// resizeHost is a fixedSizeClassHost (runc resizes live, gvisor keeps its
// boot size) that records each live resize and can fail them.
type resizeHost struct {
	*fixedSizeClassHost
	mu   sync.Mutex
	last map[string][2]float64
	fail error
}

func (h *resizeHost) Resize(ctx context.Context, id string, cpu float64, ramMB int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail != nil {
		return h.fail
	}
	h.last[id] = [2]float64{cpu, float64(ramMB)}
	return nil
}

func (h *resizeHost) resizedTo(id string) ([2]float64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.last[id]
	return v, ok
}

// TestWarmCreateSizes: a pool is per runtime class, and a create claims
// only from its own class's pool. A create whose cpu or ram_mb differs
// from the pooled sandbox's is served warm where the class resizes a
// running sandbox live and the size is within the pooled boot's headroom
// — the host resizes it before the create answers, and the record (size
// and live headroom) is what a cold create of the body records — and
// boots cold, leaving the pool alone, where the class cannot (gvisor),
// the size is beyond the headroom, or below the pooled boot's memory. A
// resize that fails discards the pooled sandbox and boots cold.
func TestWarmCreateSizes(t *testing.T) {
	ctx := context.Background()
	newHost := func() *resizeHost {
		return &resizeHost{fixedSizeClassHost: &fixedSizeClassHost{fakeHost: &fakeHost{}}, last: map[string][2]float64{}}
	}
	tests := []struct {
		name     string
		pool     CreateRequest // the pooled sandbox's class and size
		create   CreateRequest
		fail     error // the host's live resize fails
		warm     bool
		resized  bool
		poolKept bool // a cold create leaves the pooled sandbox ready
	}{
		{name: "runc, same size", pool: CreateRequest{}, create: CreateRequest{}, warm: true},
		{name: "runc, bigger", pool: CreateRequest{}, create: CreateRequest{CPU: ptr(2.0), RAMMB: ptr(1024)}, warm: true, resized: true},
		{name: "runc, fewer cpus", pool: CreateRequest{CPU: ptr(2.0)}, create: CreateRequest{CPU: ptr(1.0)}, warm: true, resized: true},
		{name: "runc, less memory than the pooled boot", pool: CreateRequest{}, create: CreateRequest{RAMMB: ptr(256)}, poolKept: true},
		{name: "runc, beyond the headroom", pool: CreateRequest{}, create: CreateRequest{CPU: ptr(32.0)}, poolKept: true},
		{name: "gvisor, same size", pool: CreateRequest{Runtime: "gvisor"}, create: CreateRequest{Runtime: "gvisor"}, warm: true},
		{name: "gvisor, bigger", pool: CreateRequest{Runtime: "gvisor"}, create: CreateRequest{Runtime: "gvisor", CPU: ptr(2.0)}, poolKept: true},
		{name: "gvisor create, runc pool", pool: CreateRequest{}, create: CreateRequest{Runtime: "gvisor"}, poolKept: true},
		{name: "runc create, gvisor pool", pool: CreateRequest{Runtime: "gvisor"}, create: CreateRequest{}, poolKept: true},
		{name: "resize fails", pool: CreateRequest{}, create: CreateRequest{RAMMB: ptr(1024)}, fail: errors.New("cgroup write")},
		{name: "resize conflicts", pool: CreateRequest{}, create: CreateRequest{RAMMB: ptr(1024)}, fail: fmt.Errorf("memory in use: %w", sandbox.ErrConflict)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost()
			h.fail = tc.fail
			s, st := newServiceWith(t, h, "", nil)
			pooled := pooledSandboxOf(t, s, st, tc.pool)
			r := tc.create
			r.Template = "busybox"
			got, err := s.Create(ctx, org, r)
			if err != nil {
				t.Fatal(err)
			}
			if warm := got.ID == pooled.ID && got.Start == sandbox.StartWarm; warm != tc.warm {
				t.Fatalf("create %+v from a pool of %+v: %s %s, want warm %v", tc.create, tc.pool, got.ID, got.Start, tc.warm)
			}
			if _, ok := h.resizedTo(pooled.ID); ok != tc.resized && tc.fail == nil {
				t.Errorf("host resized the pooled sandbox: %v, want %v", ok, tc.resized)
			}
			back, err := st.GetSandbox(ctx, "", pooled.ID)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.poolKept && (back.OrgID != PoolOrgID || back.Metadata[store.MetaPoolReady] != "1"):
				t.Errorf("the pool lost its sandbox to a create it cannot serve: %s %v", back.OrgID, back.Metadata)
			case !tc.warm && !tc.poolKept && back.State != sandbox.StateDeleting && back.State != sandbox.StateDeleted:
				t.Errorf("pooled sandbox after a failed claim: %s, want discarded", back.State)
			}
			if !tc.warm {
				return
			}
			// The record a cold create of the same body makes.
			r.Name = "cold"
			cold, err := s.Create(ctx, org, r)
			if err != nil {
				t.Fatal(err)
			}
			cold, _, err = s.WaitFor(ctx, org, cold.ID, sandbox.StateRunning, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if got.CPU != cold.CPU || got.RAMMB != cold.RAMMB || got.Runtime != cold.Runtime || !reflect.DeepEqual(got.Live, cold.Live) {
				t.Errorf("warm: cpu %g ram %d %s live %+v; cold: cpu %g ram %d %s live %+v",
					got.CPU, got.RAMMB, got.Runtime, got.Live, cold.CPU, cold.RAMMB, cold.Runtime, cold.Live)
			}
			if v, ok := h.resizedTo(pooled.ID); tc.resized && (!ok || v != [2]float64{got.CPU, float64(got.RAMMB)}) {
				t.Errorf("host resized to %v, want %g/%d", v, got.CPU, got.RAMMB)
			}
			if rb, err := s.Get(ctx, org, got.ID, false); err != nil || rb.CPU != got.CPU || rb.RAMMB != got.RAMMB {
				t.Errorf("read back: %+v %v", rb, err)
			}
		})
	}
}

// TestWarmCreateSSHKeys: a create with ssh_keys is served warm — the keys
// live only in the record, where the SSH gateway looks them up at each
// login (SSHLogin), so the claimed sandbox takes them with the rest of the
// caller's record, as a cold create of the same body stores them — and a
// key logs in only to the sandbox that was created with it. A create with
// gpus still boots cold: the runtime gets GPUs at boot.
func TestWarmCreateSSHKeys(t *testing.T) {
	ctx := context.Background()
	h := &fakeHost{GPUs: []GPU{{Index: 0, Model: "NVIDIA A100-SXM4-40GB", Device: "/dev/nvidia0", CDIDevice: "nvidia.com/gpu=0"}}}
	s, st := newTestService(t, h)
	newKey := func() (ssh.PublicKey, string) {
		p, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := ssh.NewPublicKey(p)
		if err != nil {
			t.Fatal(err)
		}
		return pub, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	}
	key, line := newKey()
	otherKey, otherLine := newKey()

	pooled := pooledSandbox(t, s, st)
	other := pooledSandbox(t, s, st)
	warm, err := s.Create(ctx, org, CreateRequest{Template: "busybox", SSHKeys: []string{line + " me@laptop"}})
	if err != nil {
		t.Fatal(err)
	}
	if (warm.ID != pooled.ID && warm.ID != other.ID) || warm.Start != sandbox.StartWarm || !slices.Equal(warm.SSHKeys, []string{line}) {
		t.Fatalf("create with ssh_keys = %s %s %q, want a pooled sandbox, warm, with the key (no comment)", warm.ID, warm.Start, warm.SSHKeys)
	}
	warm2, err := s.Create(ctx, org, CreateRequest{Template: "busybox", SSHKeys: []string{otherLine}})
	if err != nil {
		t.Fatal(err)
	}
	if warm2.Start != sandbox.StartWarm || warm2.ID == warm.ID {
		t.Fatalf("second create with ssh_keys = %s %s, want the other pooled sandbox, warm", warm2.ID, warm2.Start)
	}
	cold, err := s.Create(ctx, org, CreateRequest{Template: "busybox", SSHKeys: []string{line + " me@laptop"}})
	if err != nil {
		t.Fatal(err)
	}
	if cold.Start != sandbox.StartCold {
		t.Fatalf("create with an empty pool: start %s, want cold", cold.Start)
	}
	if got, err := s.Get(ctx, org, warm.ID, false); err != nil || !slices.Equal(got.SSHKeys, cold.SSHKeys) {
		t.Errorf("stored keys: warm %q (%v), cold %q", got.SSHKeys, err, cold.SSHKeys)
	}

	for _, tc := range []struct {
		name string
		id   string
		key  ssh.PublicKey
		ok   bool
	}{
		{"its own key", warm.ID, key, true},
		{"the other warm sandbox's own key", warm2.ID, otherKey, true},
		{"the other warm sandbox's key", warm.ID, otherKey, false},
		{"a key given to another sandbox", warm2.ID, key, false},
	} {
		p, err := s.SSHLogin(ctx, tc.id, tc.key)
		switch {
		case tc.ok && (err != nil || p.OrgID != org.OrgID || p.ProjectID == ""):
			t.Errorf("%s: login %+v, %v; want the caller's org and project", tc.name, p, err)
		case !tc.ok && !errors.Is(err, sandbox.ErrUnauthenticated):
			t.Errorf("%s: login %+v, %v; want refused", tc.name, p, err)
		}
	}

	p := pooledSandbox(t, s, st)
	gpu, err := s.Create(ctx, org, CreateRequest{Template: "busybox", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if gpu.ID == p.ID || gpu.Start != sandbox.StartCold || gpu.GPUs != 1 {
		t.Errorf("create with gpus = %s %s %d, want cold", gpu.ID, gpu.Start, gpu.GPUs)
	}
	if back, err := st.GetSandbox(ctx, PoolOrgID, p.ID); err != nil || back.Metadata[store.MetaPoolReady] != "1" {
		t.Errorf("the pool lost its sandbox to a create with gpus: %v %+v", err, back.Metadata)
	}
}
