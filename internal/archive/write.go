package archive

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/oklog/ulid/v2"

	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// DefaultTouchAfter is how old an existing chunk must be before a Write
// that reuses it renews its ModTime (objstore.Store.Touch), keeping it out
// of GC's reach while the new manifest is not written yet. Younger chunks
// are protected by GC's grace period already.
const DefaultTouchAfter = time.Hour

// Options tune Write. The zero value gives the defaults.
type Options struct {
	// ID names the archive (1 to 128 of [A-Za-z0-9._-]); the manifest is
	// stored at ManifestKey(ID). Empty means a new "arc_<ULID>".
	ID string
	// ChunkSize is the chunk length in bytes (default DefaultChunkSize, at
	// most MaxChunkSize). Archives share chunks only with archives of the
	// same chunk size.
	ChunkSize int64
	// Workers is how many chunks are hashed, compressed and uploaded at
	// once (default DefaultWorkers). Memory is about (Workers+1) chunks.
	Workers int
	// Level is the zstd level, 1 (fastest, the default) to 22.
	Level int
	// TouchAfter overrides DefaultTouchAfter.
	TouchAfter time.Duration
	// Progress, if set, is called after each chunk with the input bytes
	// done so far (holes included) and the total. Calls never overlap and
	// done only grows; done reaches total before the manifest is written,
	// and only Write returning nil means the archive is complete.
	Progress func(done, total int64)
	// Now returns the current time for CreatedAt and chunk ages (default
	// time.Now); tests replace it.
	Now func() time.Time
}

func (o Options) withDefaults() (Options, error) {
	if o.ID == "" {
		o.ID = "arc_" + ulid.Make().String()
	}
	if err := validID(o.ID); err != nil {
		return o, err
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.ChunkSize < 4096 || o.ChunkSize > MaxChunkSize {
		return o, fmt.Errorf("chunk size %d: want 4096 to %d: %w", o.ChunkSize, MaxChunkSize, sandbox.ErrInvalidArgument)
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Level == 0 {
		o.Level = 1
	}
	if o.Level < 1 || o.Level > 22 {
		return o, fmt.Errorf("zstd level %d: want 1 to 22: %w", o.Level, sandbox.ErrInvalidArgument)
	}
	if o.TouchAfter <= 0 {
		o.TouchAfter = DefaultTouchAfter
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// Result is what Write did.
type Result struct {
	// Key is where the manifest was stored (Manifest.Key()).
	Key string
	// Manifest is the manifest as stored.
	Manifest Manifest
	// ChunksUploaded counts chunks this write stored; ChunksReused counts
	// distinct chunks that already existed in the bucket; Holes counts
	// chunks of zeros that were not stored.
	ChunksUploaded int
	ChunksReused   int
	Holes          int
	// BytesUploaded is the compressed bytes this write stored (manifest
	// excluded).
	BytesUploaded int64
}

// WriteFile archives the file at path; see Write. On Linux the file's holes
// are found with SEEK_HOLE and not read at all.
func WriteFile(ctx context.Context, store objstore.Store, bucket, path string, opts Options) (Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return Result{}, fmt.Errorf("archive: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Result{}, fmt.Errorf("archive: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return Result{}, fmt.Errorf("archive %s: not a regular file: %w", path, sandbox.ErrInvalidArgument)
	}
	return Write(ctx, store, bucket, f, fi.Size(), opts)
}

// Write archives the first size bytes of src into bucket, which must exist,
// and returns the stored manifest. src must not change while Write runs.
// If src is an *os.File, its holes are found without reading them (Linux).
//
// Chunks are uploaded first, in parallel, each only if absent; the manifest
// last. On any error no manifest exists and the chunks already uploaded
// stay: a retry skips them, and GC removes them if no retry comes. Write
// returns an error wrapping sandbox.ErrAlreadyExists if a manifest with the
// ID exists, sandbox.ErrInvalidArgument for bad options, and the object
// store's or src's error otherwise (objstore.ErrUnavailable when the store
// is down).
func Write(ctx context.Context, store objstore.Store, bucket string, src io.ReaderAt, size int64, opts Options) (Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Result{}, fmt.Errorf("archive: %w", err)
	}
	if size < 0 {
		return Result{}, fmt.Errorf("archive: size %d: %w", size, sandbox.ErrInvalidArgument)
	}
	key := ManifestKey(opts.ID)
	if _, err := store.Stat(ctx, bucket, key); err == nil {
		return Result{}, fmt.Errorf("archive %s: %w", opts.ID, sandbox.ErrAlreadyExists)
	} else if !errors.Is(err, objstore.ErrNotFound) {
		return Result{}, fmt.Errorf("archive %s: %w", opts.ID, err)
	}
	created := opts.Now().UTC()
	n := int((size + opts.ChunkSize - 1) / opts.ChunkSize)
	w := &writer{
		store:  store,
		bucket: bucket,
		opts:   opts,
		hashes: make([]string, n),
		seen:   make(map[string]*upload),
		prog:   &progress{fn: opts.Progress, total: size},
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan chunkJob)
	free := make(chan []byte, opts.Workers+1)
	for range opts.Workers + 1 {
		free <- make([]byte, opts.ChunkSize)
	}
	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Go(func() { w.work(wctx, cancel, jobs, free) })
	}
	w.read(wctx, cancel, src, size, jobs, free)
	wg.Wait()
	if err := context.Cause(wctx); err != nil {
		return Result{}, fmt.Errorf("archive %s: %w", opts.ID, err)
	}

	m := Manifest{
		Version:     FormatVersion,
		ID:          opts.ID,
		CreatedAt:   created,
		Size:        size,
		ChunkSize:   opts.ChunkSize,
		Compression: CompressionZstd,
		SHA256:      ListDigest(w.hashes, size, opts.ChunkSize),
		DataBytes:   w.dataBytes.Load(),
		StoredBytes: w.storedBytes.Load(),
		Chunks:      w.hashes,
	}
	data, err := json.Marshal(&m)
	if err != nil {
		return Result{}, fmt.Errorf("archive %s: %w", opts.ID, err)
	}
	if err := store.Put(ctx, bucket, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return Result{}, fmt.Errorf("archive %s: manifest: %w", opts.ID, err)
	}
	return Result{
		Key:            key,
		Manifest:       m,
		ChunksUploaded: int(w.uploaded.Load()),
		ChunksReused:   int(w.reused.Load()),
		Holes:          int(w.holes.Load()),
		BytesUploaded:  w.bytesUploaded.Load(),
	}, nil
}

type chunkJob struct {
	i   int
	buf []byte // chunk-size buffer from the free list
	n   int64  // bytes of buf in use
}

// upload is one distinct chunk's fate within a Write, so two identical
// chunks of one input are stored (or found) once.
type upload struct {
	done chan struct{}
	err  error
}

type writer struct {
	store  objstore.Store
	bucket string
	opts   Options
	prog   *progress

	hashes []string // by chunk index; each written by one goroutine

	mu   sync.Mutex
	seen map[string]*upload

	holes, uploaded, reused               atomic.Int64
	dataBytes, storedBytes, bytesUploaded atomic.Int64
}

// read feeds chunks to the workers in order. Chunks that SEEK_HOLE says
// are holes are neither read nor hashed. It closes jobs.
func (w *writer) read(ctx context.Context, fail context.CancelCauseFunc, src io.ReaderAt, size int64, jobs chan<- chunkJob, free chan []byte) {
	defer close(jobs)
	ex := dataExtents(src, size)
	for i := range w.hashes {
		off := int64(i) * w.opts.ChunkSize
		n := min(w.opts.ChunkSize, size-off)
		if !ex.hasData(off, off+n) {
			w.holes.Add(1)
			w.prog.add(n)
			continue
		}
		var buf []byte
		select {
		case buf = <-free:
		case <-ctx.Done():
			return
		}
		got, err := src.ReadAt(buf[:n], off)
		if int64(got) < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			fail(fmt.Errorf("read at %d: %w", off, err))
			return
		}
		select {
		case jobs <- chunkJob{i: i, buf: buf, n: n}:
		case <-ctx.Done():
			return
		}
	}
}

// work hashes, compresses and stores chunks until jobs is closed. After a
// failure it only returns buffers.
func (w *writer) work(ctx context.Context, fail context.CancelCauseFunc, jobs <-chan chunkJob, free chan<- []byte) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(w.opts.Level)),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false), // every chunk is verified by SHA-256
	)
	if err != nil {
		fail(err)
	}
	var cbuf []byte
	for j := range jobs {
		if ctx.Err() == nil && enc != nil {
			if err := w.chunk(ctx, enc, &cbuf, j); err != nil {
				fail(err)
			}
		}
		free <- j.buf
	}
	if enc != nil {
		enc.Close()
	}
}

func (w *writer) chunk(ctx context.Context, enc *zstd.Encoder, cbuf *[]byte, j chunkJob) error {
	data := j.buf[:j.n]
	if isZero(data) {
		w.holes.Add(1)
		w.prog.add(j.n)
		return nil
	}
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	w.hashes[j.i] = h
	w.dataBytes.Add(j.n)
	if err := w.ensure(ctx, h, data, enc, cbuf); err != nil {
		return err
	}
	w.prog.add(j.n)
	return nil
}

// ensure makes chunk h exist in the bucket, once per Write.
func (w *writer) ensure(ctx context.Context, h string, data []byte, enc *zstd.Encoder, cbuf *[]byte) error {
	w.mu.Lock()
	if u, ok := w.seen[h]; ok {
		w.mu.Unlock()
		select {
		case <-u.done:
			return u.err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	u := &upload{done: make(chan struct{})}
	w.seen[h] = u
	w.mu.Unlock()
	defer close(u.done)
	u.err = w.storeChunk(ctx, h, data, enc, cbuf)
	return u.err
}

// storeChunk stores chunk h unless it exists; an existing chunk older than
// TouchAfter is touched so a concurrent GC sees it as young.
func (w *writer) storeChunk(ctx context.Context, h string, data []byte, enc *zstd.Encoder, cbuf *[]byte) error {
	key := ChunkKey(h)
	info, err := w.store.Stat(ctx, w.bucket, key)
	switch {
	case err == nil && w.opts.Now().Sub(info.ModTime) < w.opts.TouchAfter:
		w.reused.Add(1)
		w.storedBytes.Add(info.Size)
		return nil
	case err == nil:
		err = w.store.Touch(ctx, w.bucket, key)
		if err == nil {
			w.reused.Add(1)
			w.storedBytes.Add(info.Size)
			return nil
		}
		if !errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("chunk %s: %w", h, err)
		}
		// Collected between Stat and Touch: store it again.
	case !errors.Is(err, objstore.ErrNotFound):
		return fmt.Errorf("chunk %s: %w", h, err)
	}
	*cbuf = encode(enc, data, (*cbuf)[:0])
	if err := w.store.Put(ctx, w.bucket, key, bytes.NewReader(*cbuf), int64(len(*cbuf))); err != nil {
		return fmt.Errorf("chunk %s: %w", h, err)
	}
	w.uploaded.Add(1)
	w.storedBytes.Add(int64(len(*cbuf)))
	w.bytesUploaded.Add(int64(len(*cbuf)))
	return nil
}

// encode compresses data into one zstd frame appended to dst. Data that
// does not compress (media, archives, encrypted files: common on disks)
// goes into a frame of raw blocks instead, a copy instead of a futile
// search for matches; it decodes like any other frame. Eight samples
// spread over the chunk decide.
func encode(enc *zstd.Encoder, data, dst []byte) []byte {
	const samples, sampleLen = 8, 16 << 10
	if len(data) < samples*sampleLen*4 {
		return enc.EncodeAll(data, dst)
	}
	var scratch [sampleLen + 512]byte
	step := (len(data) - sampleLen) / (samples - 1)
	for i := range samples {
		s := data[i*step : i*step+sampleLen]
		if len(enc.EncodeAll(s, scratch[:0])) < sampleLen*97/100 {
			return enc.EncodeAll(data, dst)
		}
	}
	return rawFrame(data, dst)
}

// rawFrame appends a zstd frame holding data in raw (stored) blocks: the
// frame header with single-segment and a 4-byte content size, then blocks
// of at most 128 KiB each behind a 3-byte header (RFC 8878, 3.1.1).
func rawFrame(data, dst []byte) []byte {
	const maxBlock = 128 << 10
	n := len(data)
	dst = append(dst, 0x28, 0xb5, 0x2f, 0xfd) // magic, little-endian
	// Frame_Header_Descriptor: FCS field 4 bytes (flag 2), single segment.
	dst = append(dst, 2<<6|1<<5, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	for first := true; first || len(data) > 0; first = false {
		k := min(len(data), maxBlock)
		last := 0
		if k == len(data) {
			last = 1
		}
		h := uint32(k)<<3 | 0<<1 | uint32(last) // Block_Type 0 = raw
		dst = append(dst, byte(h), byte(h>>8), byte(h>>16))
		dst = append(dst, data[:k]...)
		data = data[k:]
	}
	return dst
}

// zeros is compared against and hashed in place of holes.
var zeros = make([]byte, 64<<10)

func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

func writeZeros(w io.Writer, n int64) {
	for n > 0 {
		k := min(n, int64(len(zeros)))
		w.Write(zeros[:k])
		n -= k
	}
}

// randSuffix names temporary files.
func randSuffix() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
