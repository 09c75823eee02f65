package image

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// WriteTree writes the directory root — a template version's flattened
// root filesystem — as a tar to w: ownership, modes, times, the kept
// xattrs and hard links as they are (device nodes and sockets are left
// out, as a flattened tree has none a sandbox uses). UnpackTree reads it
// back on another host.
func WriteTree(ctx context.Context, root string, w io.Writer) error {
	if err := writeDiffTar(ctx, root, nil, w); err != nil {
		return fmt.Errorf("image: tar of %s: %w", root, err)
	}
	return nil
}

// UnpackTree writes the tree of a tar WriteTree made at dest, which must
// not exist, with the checks of a pulled layer (no entry climbs out of
// dest or through a symlink). It unpacks into a temporary sibling and
// renames it into place, so dest is either absent or complete.
func UnpackTree(ctx context.Context, r io.Reader, dest string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".unpack-")
	if err != nil {
		return fmt.Errorf("image: unpack: %w", err)
	}
	defer removeAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("image: unpack: %w", err)
	}
	links, err := extract(ctx, r, tmp, &budget{left: math.MaxInt64})
	if err != nil {
		return fmt.Errorf("image: unpack %s: %w", dest, err)
	}
	if len(links) > 0 {
		return errorf(ErrInvalid, "unpack %s: hard link %q names %q, which the tar does not hold", dest, links[0].Name, links[0].Target)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("image: unpack: %w", err)
	}
	return nil
}
