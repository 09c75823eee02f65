package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/platinum-dev/platinum/internal/objstore"
)

// sparseBlock is the granularity at which Restore leaves zeros unwritten:
// the usual file system block.
const sparseBlock = 4096

// RestoreOptions tune Restore. The zero value gives the defaults.
type RestoreOptions struct {
	// Workers is how many chunks are fetched, decompressed and verified at
	// once (default DefaultWorkers).
	Workers int
	// Progress, if set, is called in input order after each chunk is
	// written and hashed, with bytes done (holes included) and the total.
	// Calls never overlap.
	Progress func(done, total int64)
}

// Restore recreates the archive whose manifest is at manifestKey as the
// file path, and returns the manifest. The file is sparse: holes, and every
// all-zero 4 KiB block inside chunks, are left unwritten. Every chunk's
// SHA-256 is checked before it is written, and the manifest's digest
// against its chunk list (version 2) or the whole file's SHA-256 at the end
// (version 1); the file is fsynced and only then renamed onto path, so path
// holds either what it held before or the complete, verified archive. A
// crash mid-restore leaves a ".<name>.restore-*" file beside path, which
// the caller's recovery should remove.
//
// It returns an error wrapping objstore.ErrNotFound if the manifest (no
// such archive) or a chunk (collected or lost) is missing, ErrCorrupt if
// stored data does not match, objstore.ErrUnavailable if the store is
// down, and a file system error otherwise. path's directory must exist.
func Restore(ctx context.Context, store objstore.Store, bucket, manifestKey, path string, opts RestoreOptions) (Manifest, error) {
	m, err := ReadManifest(ctx, store, bucket, manifestKey)
	if err != nil {
		return Manifest{}, err
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".restore-"+randSuffix())
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Manifest{}, fmt.Errorf("restore %s: %w", m.ID, err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Truncate(m.Size); err != nil {
		return Manifest{}, fmt.Errorf("restore %s: %w", m.ID, err)
	}
	r := &restorer{store: store, bucket: bucket, m: &m, f: f, opts: opts}
	if err := r.run(ctx); err != nil {
		return Manifest{}, fmt.Errorf("restore %s: %w", m.ID, err)
	}
	if err := f.Sync(); err != nil {
		return Manifest{}, fmt.Errorf("restore %s: %w", m.ID, err)
	}
	if err := f.Close(); err != nil {
		return Manifest{}, fmt.Errorf("restore %s: %w", m.ID, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return Manifest{}, fmt.Errorf("restore %s: %w", m.ID, err)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return m, nil
}

type restorer struct {
	store  objstore.Store
	bucket string
	m      *Manifest
	f      *os.File
	opts   RestoreOptions
}

// piece is one chunk, written, to be hashed into the whole-file digest
// (version 1) and its buffer freed, in order. data is nil for a hole.
type piece struct {
	i    int
	data []byte
}

// run fetches and writes chunks in parallel, and hashes them in order.
// At most 2×Workers chunks are between dispatch and the in-order hash, which
// bounds memory to that many chunk buffers.
func (r *restorer) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	n := len(r.m.Chunks)
	inflight := 2 * r.opts.Workers
	tokens := make(chan struct{}, inflight)
	jobs := make(chan int)
	results := make(chan piece, inflight)
	free := make(chan []byte, inflight)

	var wg sync.WaitGroup
	wg.Go(func() { // dispatcher
		defer close(jobs)
		for i := range n {
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	})
	for range r.opts.Workers {
		wg.Go(func() { r.work(ctx, cancel, jobs, results, free) })
	}

	prog := &progress{fn: r.opts.Progress, total: r.m.Size}
	whole := sha256.New()
	v1 := r.m.Version == formatVersion1
	pending := make(map[int]piece, inflight)
	for next := 0; next < n; {
		select {
		case p := <-results:
			pending[p.i] = p
		case <-ctx.Done():
			wg.Wait()
			return context.Cause(ctx)
		}
		for {
			p, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			size := r.m.ChunkLen(next)
			// Version 2's digest was checked against the chunk list by
			// Validate and every chunk against its name by fetch; only
			// version 1 hashes the whole file.
			switch {
			case p.data == nil && v1:
				writeZeros(whole, size)
			case p.data != nil:
				if v1 {
					whole.Write(p.data)
				}
				free <- p.data[:cap(p.data)]
			}
			<-tokens
			prog.add(size)
			next++
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if got := hex.EncodeToString(whole.Sum(nil)); v1 && got != r.m.SHA256 {
		return fmt.Errorf("file sha256 %s, manifest says %s: %w", got, r.m.SHA256, ErrCorrupt)
	}
	return nil
}

func (r *restorer) work(ctx context.Context, fail context.CancelCauseFunc, jobs <-chan int, results chan<- piece, free chan []byte) {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(uint64(r.m.ChunkSize)),
	)
	if err != nil {
		fail(err)
		for range jobs {
		}
		return
	}
	defer dec.Close()
	var comp bytes.Buffer
	for i := range jobs {
		if ctx.Err() != nil {
			continue
		}
		h := r.m.Chunks[i]
		if h == "" {
			results <- piece{i: i}
			continue
		}
		var buf []byte
		select {
		case buf = <-free:
		default:
			buf = make([]byte, r.m.ChunkSize)
		}
		data, err := r.fetch(ctx, dec, &comp, i, buf)
		if err == nil {
			err = writeSparse(r.f, data, int64(i)*r.m.ChunkSize)
		}
		if err != nil {
			fail(err)
			continue
		}
		results <- piece{i: i, data: data}
	}
}

// fetch downloads chunk i, decompresses it into buf and checks its length
// and hash.
func (r *restorer) fetch(ctx context.Context, dec *zstd.Decoder, comp *bytes.Buffer, i int, buf []byte) ([]byte, error) {
	h := r.m.Chunks[i]
	rc, err := r.store.Get(ctx, r.bucket, ChunkKey(h))
	if err != nil {
		return nil, fmt.Errorf("chunk %d: %w", i, err)
	}
	comp.Reset()
	// A chunk that compressed badly is a little larger than its content.
	_, err = comp.ReadFrom(io.LimitReader(rc, r.m.ChunkSize+r.m.ChunkSize/8+(64<<10)))
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("chunk %d: %w", i, err)
	}
	data, err := dec.DecodeAll(comp.Bytes(), buf[:0])
	if err != nil {
		return nil, fmt.Errorf("chunk %d (%s): %v: %w", i, h, err, ErrCorrupt)
	}
	if want := r.m.ChunkLen(i); int64(len(data)) != want {
		return nil, fmt.Errorf("chunk %d (%s): %d bytes, want %d: %w", i, h, len(data), want, ErrCorrupt)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != h {
		return nil, fmt.Errorf("chunk %d (%s): content hashes to %x: %w", i, h, sum, ErrCorrupt)
	}
	return data, nil
}

// writeSparse writes data at off, skipping all-zero blocks: the file was
// truncated to size, so they read as zeros without taking space.
func writeSparse(f *os.File, data []byte, off int64) error {
	for start := 0; start < len(data); {
		// Skip zero blocks.
		for start < len(data) && isZero(data[start:min(start+sparseBlock, len(data))]) {
			start += sparseBlock
		}
		if start >= len(data) {
			return nil
		}
		end := start
		for end < len(data) && !isZero(data[end:min(end+sparseBlock, len(data))]) {
			end += sparseBlock
		}
		end = min(end, len(data))
		if _, err := f.WriteAt(data[start:end], off+int64(start)); err != nil {
			return err
		}
		start = end
	}
	return nil
}
