// Package disk keeps sandbox disks on an XFS pool with reflink, where a
// copy of a whole disk image is a metadata operation (milliseconds, no
// space used until the copies diverge). That is what makes snapshot, fork
// and create-from-template cheap.
//
// The pool is the host's own filesystem when it already supports reflink
// (XFS, btrfs), and otherwise a sparse XFS file loop-mounted under the data
// dir. Each sandbox disk is itself a sparse XFS image in the pool, mounted
// through a loop device: its size is a hard quota, and XFS grows online.
// The sandbox root is an overlay whose upper layer lives on that disk.
//
// Loop devices are attached with the kernel's autoclear flag, so unmounting
// a filesystem also frees its loop device; nothing needs to remember them.
package disk

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Options tunes Open.
type Options struct {
	// PoolSizeBytes is the size of the sparse pool file made when the data
	// dir cannot reflink. It costs nothing until used; 0 means DefaultPoolSize.
	PoolSizeBytes int64
}

// DefaultPoolSize is the pool file's apparent size: 1 TiB, sparse.
const DefaultPoolSize int64 = 1 << 40

// minPoolSize keeps the pool above XFS's minimum filesystem size (~300 MB).
const minPoolSize int64 = 512 << 20

// MaxImageGB bounds disk image sizes (64 TiB), far above any sandbox but
// below what would overflow the arithmetic.
const MaxImageGB = 64 << 10

// Pool is a reflink-capable directory holding sandbox disk images. Its
// methods are safe for concurrent use, but callers must not mount, grow or
// remove the same image from two goroutines at once.
type Pool struct {
	dir  string // the data dir given to Open
	path string // the reflink-capable directory
	// loopMounted is true when path is dir/pool, our loop-mounted file.
	loopMounted bool
	log         *slog.Logger

	blankMu sync.Mutex
	blanks  map[int]*sync.Mutex // per size, so one slow format does not block others

	// Spare disks (spare_linux.go), guarded by spareMu.
	spareMu      sync.Mutex
	spareWant    int              // spares to keep per size; 0 = off
	spares       map[int][]string // size → ready spare ids
	spareFilling map[int]bool     // size → a refill goroutine runs
	spareStop    bool
	spareDirs    []string // made in every spare
	spareWG      sync.WaitGroup
}

// Path returns the reflink-capable directory. Images live in Path()/images,
// the formatted blanks in Path()/blank.
func (p *Pool) Path() string { return p.path }

// ImagePath returns where image name lives (whether or not it exists).
func (p *Pool) ImagePath(name string) string {
	return filepath.Join(p.path, "images", name+".img")
}

func (p *Pool) blankLock(sizeGB int) *sync.Mutex {
	p.blankMu.Lock()
	defer p.blankMu.Unlock()
	if p.blanks == nil {
		p.blanks = map[int]*sync.Mutex{}
	}
	mu := p.blanks[sizeGB]
	if mu == nil {
		mu = &sync.Mutex{}
		p.blanks[sizeGB] = mu
	}
	return mu
}

// validName accepts image names that are plain file names.
func validName(name string) error {
	if name == "" || len(name) > 200 || strings.HasPrefix(name, ".") || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("image name %q: want a plain file name of 1..200 bytes not starting with '.': %w", name, sandbox.ErrInvalidArgument)
	}
	return nil
}

func validSize(sizeGB int) error {
	if sizeGB < 1 || sizeGB > MaxImageGB {
		return fmt.Errorf("image size %d GB: want 1..%d: %w", sizeGB, MaxImageGB, sandbox.ErrInvalidArgument)
	}
	return nil
}
