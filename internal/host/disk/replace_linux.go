package disk

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// ReplaceImage makes image dst a reflink copy of image src, replacing dst
// atomically if it exists: a reader (or a crash) sees either the old
// image or the whole new one, never a mix. dst must not be mounted (a
// mounted old image would keep serving the old data). It returns an error
// wrapping sandbox.ErrNotFound if src does not exist. Restoring a sandbox
// in place from a snapshot is this call.
func (p *Pool) ReplaceImage(ctx context.Context, src, dst string) error {
	if err := validName(src); err != nil {
		return err
	}
	if err := validName(dst); err != nil {
		return err
	}
	in, err := os.Open(p.ImagePath(src))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replace %s with %s: %w", dst, src, sandbox.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("replace %s with %s: %w", dst, src, err)
	}
	defer in.Close()
	tmp := p.tmpName("replace")
	out, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("replace %s: %w", dst, err)
	}
	err = unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p.ImagePath(dst))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s with %s: %w", dst, src, err)
	}
	return nil
}
