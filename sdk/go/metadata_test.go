package platinum_test

import (
	"context"
	"errors"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestLastStartIsThePlatformsKey: against ptd, a
// create may not set metadata.last_start (400 invalid_request, field
// metadata), and a metadata filter never matches the platform's value.
func TestLastStartIsThePlatformsKey(t *testing.T) {
	_, c := newServer(t)
	ctx := context.Background()
	_, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Metadata: map[string]string{"last_start": "mine"}})
	var ae *platinum.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Field() != "metadata" {
		t.Fatalf("create setting last_start: %v", err)
	}
	sb, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Metadata: map[string]string{"team": "a"}}, platinum.WaitForRunning(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes.Stop(ctx, sb.ID, platinum.WaitForStopped(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := c.Sandboxes.Start(ctx, sb.ID, platinum.WaitForRunning(5*time.Second))
	if err != nil || got.Metadata["last_start"] == "" {
		t.Fatalf("start: %v %v", got, err)
	}
	for _, tc := range []struct {
		md   map[string]string
		want int
	}{{map[string]string{"team": "a"}, 1}, {map[string]string{"last_start": got.Metadata["last_start"]}, 0}} {
		l, err := c.Sandboxes.List(ctx, platinum.ListOptions{Metadata: tc.md})
		if err != nil || len(l.Rows) != tc.want {
			t.Errorf("list %v: %v %v, want %d rows", tc.md, l, err, tc.want)
		}
	}
}
