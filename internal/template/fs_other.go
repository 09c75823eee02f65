//go:build !linux

package template

import (
	"context"
	"errors"
	"os"
)

func lockFile(ctx context.Context, path string) (func(), error) {
	return nil, errors.New("template cache locking needs Linux")
}

func removeTree(dir string) { os.RemoveAll(dir) }

func renameDir(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
