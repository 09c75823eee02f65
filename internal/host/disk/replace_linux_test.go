package disk

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestReplaceImage: a snapshot (a frozen reflink clone) put back over its
// source rolls the source's files back, and leaves the snapshot usable for
// another restore.
func TestReplaceImage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, mnt := mountedImage(t, "sbx")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(mnt, "f"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("before")
	if err := Freeze(ctx, mnt); err != nil {
		t.Fatal(err)
	}
	err := p.CloneImage(ctx, "sbx", "snap")
	Thaw(ctx, mnt)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		write("after")
		if err := p.UnmountImage(ctx, mnt); err != nil {
			t.Fatal(err)
		}
		if err := p.ReplaceImage(ctx, "snap", "sbx"); err != nil {
			t.Fatalf("ReplaceImage #%d: %v", i, err)
		}
		if err := p.MountImage(ctx, "sbx", mnt); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "before" {
			t.Errorf("after restore #%d: %q %v, want \"before\"", i, b, err)
		}
	}
	if err := p.ReplaceImage(ctx, "nope", "sbx"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("replace from a missing image = %v, want ErrNotFound", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(p.Path(), "tmp")); len(entries) != 0 {
		t.Errorf("temporary files left: %d", len(entries))
	}
}
