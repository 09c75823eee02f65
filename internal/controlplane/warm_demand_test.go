package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestWarmDemand: SetWarmDemand hears of each create a pool could serve —
// handed a pooled sandbox (warm), or cold because the pool had none ready
// — once its claim has answered (a cold one once stored); a create the
// pool could not serve anyway (a size below the pooled boot's) and one
// refused (a taken name) are not demand.
func TestWarmDemand(t *testing.T) {
	ctx := context.Background()
	s, st := newTestService(t, &fakeHost{})
	var mu sync.Mutex
	var heard []string
	s.SetWarmDemand(func(_ context.Context, template, runtime string, warm bool) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, fmt.Sprintf("%s@%s warm=%v", template, runtime, warm))
	})
	pooled := pooledSandbox(t, s, st)

	ram := sandbox.DefaultRAM / 2
	if sb, err := s.Create(ctx, org, CreateRequest{Template: "busybox", RAMMB: &ram}); err != nil || sb.Start != sandbox.StartCold {
		t.Fatalf("a create of a smaller size = %+v, %v; want cold", sb, err)
	}
	if sb, err := s.Create(ctx, org, CreateRequest{Template: "busybox"}); err != nil || sb.ID != pooled.ID {
		t.Fatalf("create = %+v, %v; want the pooled sandbox", sb, err)
	}
	if sb, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Name: "mine"}); err != nil || sb.Start != sandbox.StartCold {
		t.Fatalf("create with the pool empty = %+v, %v; want cold", sb, err)
	}
	if _, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Name: "mine"}); !errors.Is(err, sandbox.ErrConflict) {
		t.Fatalf("a create with a taken name = %v; want a conflict", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"busybox@ warm=true", "busybox@ warm=false"}; !slices.Equal(heard, want) {
		t.Errorf("demand heard = %q, want %q", heard, want)
	}
}
