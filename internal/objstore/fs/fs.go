// Package fs is the local-directory object store, ptd's embedded default.
// An object is the file <dir>/<bucket>/<key>; a bucket is a directory.
// Writes go to a temporary file under <dir>/.tmp (the same file system, and
// a name no valid bucket can have), are fsynced, then renamed into place and
// the directory fsynced: a reader or a crash sees the old object or the new
// one, never a torn file. Keys are validated by objstore.ValidKey, so none
// can escape the bucket's directory.
//
// One limit S3 does not have: a key cannot also be the directory of
// another key ("a" and "a/b"); Put reports objstore.ErrConflict.
package fs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/platinum-dev/platinum/internal/objstore"
)

const (
	tmpDir = ".tmp"
	// staleTemp is how old a leftover temporary file must be before Open
	// removes it: older than any Put could run, so a concurrent writer in
	// another process sharing dir is never disturbed.
	staleTemp = 24 * time.Hour
	dirPerm   = 0o700
	filePerm  = 0o600
)

// Store is an objstore.Store over a local directory.
type Store struct {
	dir string
}

var _ objstore.Store = (*Store)(nil)

// Open returns a store rooted at dir, creating dir if needed, and removes
// temporary files a crashed Put left behind: at once when the process that
// wrote one is gone (temporary files are named after their writer's pid
// and process boot), else after a day.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("objstore fs: empty directory: %w", objstore.ErrInvalidArgument)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("objstore fs: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(abs, tmpDir), dirPerm); err != nil {
		return nil, fmt.Errorf("objstore fs: %w", err)
	}
	s := &Store{dir: abs}
	s.sweepTemps(time.Now().Add(-staleTemp))
	return s, nil
}

// Dir returns the root directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) sweepTemps(before time.Time) {
	entries, err := os.ReadDir(filepath.Join(s.dir, tmpDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && (fi.ModTime().Before(before) || writerGone(e.Name())) {
			os.Remove(filepath.Join(s.dir, tmpDir, e.Name()))
		}
	}
}

// tempOwner prefixes this process's temporary files: "<pid>-<boot>-".
var tempOwner = func() string {
	var b [6]byte
	rand.Read(b[:])
	return fmt.Sprintf("%d-%s-", os.Getpid(), hex.EncodeToString(b[:]))
}()

// writerGone reports whether the temporary file name was written by a
// process that no longer runs: its pid is gone, or is ours with another
// boot (a restart that got the same pid).
func writerGone(name string) bool {
	pidStr, rest, ok := strings.Cut(name, "-")
	if !ok || strings.HasPrefix(name, tempOwner) {
		return false
	}
	boot, _, ok := strings.Cut(rest, "-")
	if !ok || boot == "" {
		return false
	}
	var pid int
	if _, err := fmt.Sscanf(pidStr, "%d", &pid); err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return true
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func (s *Store) bucketDir(bucket string) string { return filepath.Join(s.dir, bucket) }

func (s *Store) path(bucket, key string) string {
	return filepath.Join(s.dir, bucket, filepath.FromSlash(key))
}

// EnsureBucket implements objstore.Store.
func (s *Store) EnsureBucket(ctx context.Context, bucket string) error {
	if err := objstore.ValidBucket(bucket); err != nil {
		return err
	}
	if err := os.Mkdir(s.bucketDir(bucket), dirPerm); err != nil && !errors.Is(err, iofs.ErrExist) {
		return fmt.Errorf("bucket %s: %w", bucket, err)
	}
	return syncDir(s.dir)
}

func (s *Store) checkBucket(bucket string) error {
	fi, err := os.Stat(s.bucketDir(bucket))
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("bucket %s: %w", bucket, objstore.ErrNotFound)
	}
	return nil
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, bucket, key string, r io.Reader, size int64) error {
	if err := objstore.Validate(bucket, key); err != nil {
		return err
	}
	if err := s.checkBucket(bucket); err != nil {
		return err
	}
	tmp, err := s.writeTemp(ctx, r, size)
	if err != nil {
		return fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	if err := s.publish(bucket, key, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	return nil
}

// writeTemp copies r into a new fsynced temporary file and returns its path.
func (s *Store) writeTemp(ctx context.Context, r io.Reader, size int64) (path string, err error) {
	var rnd [12]byte
	rand.Read(rnd[:])
	path = filepath.Join(s.dir, tmpDir, tempOwner+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return "", err
	}
	tmp := path // the error returns below clear path
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err := copyExact(ctx, f, r, size); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	return path, nil
}

// publish renames tmp to the object's path, creating parent directories. A
// concurrent Delete may prune a parent between MkdirAll and Rename, so a
// missing directory is retried a few times.
func (s *Store) publish(bucket, key, tmp string) error {
	dst := s.path(bucket, key)
	parent := filepath.Dir(dst)
	var err error
	for range 5 {
		if err = os.MkdirAll(parent, dirPerm); err != nil {
			if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, iofs.ErrExist) {
				return fmt.Errorf("a parent of the key is an object: %w", objstore.ErrConflict)
			}
			return err
		}
		err = os.Rename(tmp, dst)
		if err == nil {
			return syncDir(parent)
		}
		switch {
		case errors.Is(err, syscall.ENOENT):
			continue
		case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.ENOTEMPTY):
			return fmt.Errorf("key is a directory of other keys: %w", objstore.ErrConflict)
		case errors.Is(err, syscall.ENOTDIR):
			return fmt.Errorf("a parent of the key is an object: %w", objstore.ErrConflict)
		}
		return err
	}
	return err
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	if err := objstore.Validate(bucket, key); err != nil {
		return nil, err
	}
	f, err := os.Open(s.path(bucket, key))
	if err != nil {
		return nil, s.notFound(bucket, key, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("get %s/%s: %w", bucket, key, objstore.ErrNotFound)
	}
	return f, nil
}

// notFound maps a missing file (or a path through a file) to ErrNotFound.
func (s *Store) notFound(bucket, key string, err error) error {
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%s/%s: %w", bucket, key, objstore.ErrNotFound)
	}
	return fmt.Errorf("%s/%s: %w", bucket, key, err)
}

// Stat implements objstore.Store.
func (s *Store) Stat(ctx context.Context, bucket, key string) (objstore.Info, error) {
	if err := objstore.Validate(bucket, key); err != nil {
		return objstore.Info{}, err
	}
	fi, err := os.Stat(s.path(bucket, key))
	if err != nil {
		return objstore.Info{}, s.notFound(bucket, key, err)
	}
	if !fi.Mode().IsRegular() {
		return objstore.Info{}, fmt.Errorf("stat %s/%s: %w", bucket, key, objstore.ErrNotFound)
	}
	return objstore.Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Touch implements objstore.Store.
func (s *Store) Touch(ctx context.Context, bucket, key string) error {
	if _, err := s.Stat(ctx, bucket, key); err != nil {
		return err
	}
	now := time.Now()
	if err := os.Chtimes(s.path(bucket, key), now, now); err != nil {
		return s.notFound(bucket, key, err)
	}
	return nil
}

// Delete implements objstore.Store. It also removes parent directories the
// deletion left empty, up to the bucket.
func (s *Store) Delete(ctx context.Context, bucket, key string) error {
	if err := objstore.Validate(bucket, key); err != nil {
		return err
	}
	p := s.path(bucket, key)
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, iofs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil
	case err != nil:
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	case fi.IsDir():
		return nil // "a" when only "a/b" exists: no object "a"
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	bdir := s.bucketDir(bucket)
	for d := filepath.Dir(p); d != bdir && strings.HasPrefix(d, bdir); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break // not empty (or already gone): stop pruning
		}
	}
	return nil
}

// List implements objstore.Store. It walks only the directory the prefix
// names (everything before its last '/') and filters by the rest, reading
// directories in batches so a bucket of millions of chunks is streamed.
func (s *Store) List(ctx context.Context, bucket, prefix string) iter.Seq2[objstore.Info, error] {
	return objstore.CheckedList(bucket, prefix, func(yield func(objstore.Info, error) bool) {
		if err := s.checkBucket(bucket); err != nil {
			yield(objstore.Info{}, err)
			return
		}
		dirKey, namePrefix := "", prefix
		if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
			dirKey, namePrefix = prefix[:i+1], prefix[i+1:]
		}
		w := walker{ctx: ctx, root: s.bucketDir(bucket), yield: yield}
		w.walk(dirKey, namePrefix)
	})
}

type walker struct {
	ctx   context.Context
	root  string
	yield func(objstore.Info, error) bool
}

// walk lists the directory dirKey ("" or ending in '/') and recurses into
// subdirectories; only names starting with namePrefix are taken at this
// level. It returns false once the consumer stopped or an error was yielded.
func (w *walker) walk(dirKey, namePrefix string) bool {
	f, err := os.Open(filepath.Join(w.root, filepath.FromSlash(dirKey)))
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return true // nothing under this prefix
		}
		w.yield(objstore.Info{}, fmt.Errorf("list: %w", err))
		return false
	}
	defer f.Close()
	for {
		if err := w.ctx.Err(); err != nil {
			w.yield(objstore.Info{}, err)
			return false
		}
		entries, err := f.ReadDir(1024)
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), namePrefix) {
				continue
			}
			key := dirKey + e.Name()
			if e.IsDir() {
				if !w.walk(key+"/", "") {
					return false
				}
				continue
			}
			if !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if errors.Is(err, iofs.ErrNotExist) {
				continue // deleted while listing
			}
			if err != nil {
				w.yield(objstore.Info{}, fmt.Errorf("list: %w", err))
				return false
			}
			if !w.yield(objstore.Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil) {
				return false
			}
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			w.yield(objstore.Info{}, fmt.Errorf("list: %w", err))
			return false
		}
	}
}

// copyBufs are the buffers of copyExact: 1 MiB writes instead of
// io.Copy's 32 KiB into a file (os.File.ReadFrom falls back to that).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// copyExact writes exactly size bytes of r to f (any length if size is
// objstore.SizeUnknown), stopping when ctx is cancelled. An in-memory
// reader of the right length (bytes.Reader: archive chunks) is written in
// one call.
func copyExact(ctx context.Context, f *os.File, r io.Reader, size int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if mr, ok := r.(interface {
		io.WriterTo
		Len() int
	}); ok && size >= 0 {
		if int64(mr.Len()) != size {
			return fmt.Errorf("reader has %d bytes, size says %d: %w", mr.Len(), size, objstore.ErrInvalidArgument)
		}
		_, err := mr.WriteTo(f)
		return err
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	_, err := io.CopyBuffer(writerOnly{f}, &ctxReader{ctx: ctx, r: objstore.ExactReader(r, size)}, *buf)
	return err
}

// writerOnly hides os.File's ReadFrom so io.CopyBuffer uses our buffer.
type writerOnly struct{ io.Writer }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ctxReader stops a copy when ctx is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
