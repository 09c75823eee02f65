package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestImportAndLinkCheckpoint: an image imported from another host counts
// only once its fill succeeded (a failed fill leaves none), and is then the
// sandbox's checkpoint of the class given; a stop snapshot links a stopped
// sandbox's complete image, and finds none when it has none.
func TestImportAndLinkCheckpoint(t *testing.T) {
	ctx := context.Background()
	h := &Host{cfg: Config{DataDir: t.TempDir()}}
	id := sandbox.NewID(sandbox.PrefixSandbox)
	if img, err := h.linkStopImage(id, "bkp_none"); err != nil || img != "" {
		t.Fatalf("link of a sandbox without an image: %q %v, want none", img, err)
	}

	boom := errors.New("fetch failed")
	err := h.ImportCheckpoint(ctx, id, "gvisor", func(ctx context.Context, dir string) error {
		os.WriteFile(filepath.Join(dir, "checkpoint.img"), []byte("half"), 0o600)
		return boom
	})
	if !errors.Is(err, boom) || h.Checkpointed(id) {
		t.Fatalf("a failed import: %v, checkpointed %v; want the error and no image", err, h.Checkpointed(id))
	}
	if err := h.ImportCheckpoint(ctx, id, "gvisor", func(ctx context.Context, dir string) error {
		return errors.Join(os.WriteFile(filepath.Join(dir, "checkpoint.img"), []byte("kernel"), 0o600),
			os.WriteFile(filepath.Join(dir, "pages.img"), []byte("pages"), 0o600))
	}); err != nil {
		t.Fatal(err)
	}
	if m, ok := h.checkpointed(id); !ok || m.Class != "gvisor" {
		t.Fatalf("after the import: %+v %v, want a gvisor image", m, ok)
	}

	img, err := h.linkStopImage(id, "bkp_one")
	if err != nil || img == "" {
		t.Fatalf("link: %q %v", img, err)
	}
	for name, want := range map[string]string{"checkpoint.img": "kernel", "pages.img": "pages"} {
		if b, err := os.ReadFile(filepath.Join(img, name)); err != nil || string(b) != want {
			t.Fatalf("linked %s: %q %v", name, b, err)
		}
	}
	// The sandbox's own image going (a start consumed it) leaves the link.
	if err := h.removeCheckpoint(id); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(img, "pages.img")); err != nil || string(b) != "pages" {
		t.Fatalf("the linked image after the sandbox's went: %q %v", b, err)
	}
}
