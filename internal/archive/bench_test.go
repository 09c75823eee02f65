package archive_test

import (
	"context"
	"io"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/archive"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/objstore/objstoretest"
	"github.com/platinum-dev/platinum/internal/objstore/s3"
	"github.com/platinum-dev/platinum/internal/objstore/s3/s3test"
)

// Run with:
//
//	go test -run '^$' -bench . -benchtime 3x ./internal/archive/
//
// The disk is 1 GiB with 500 MiB of data (half random, half text-like) in
// scattered regions; MB/s is of the 1 GiB, data-MB/s of the 500 MiB.

const (
	benchSize = 1 << 30
	benchData = 500 * mib
)

var (
	benchOnce sync.Once
	benchDir  string
	benchSrc  string
)

// benchDisk creates the 1 GiB image once per process.
func benchDisk(b *testing.B) string {
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "archive-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = dir
		var regions []region
		// 100 regions of 5 MiB, every 10 MiB, shifted off chunk alignment.
		for i := range 100 {
			kind := byte('r')
			if i%2 == 1 {
				kind = 't'
			}
			regions = append(regions, region{off: int64(i)*10*mib + int64(i)*4099, n: 5 * mib, kind: kind})
		}
		benchSrc = filepath.Join(dir, "disk.img")
		makeSparse(b, benchSrc, benchSize, regions, 42)
	})
	if benchSrc == "" {
		b.Fatal("bench disk setup failed")
	}
	return benchSrc
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// cpuTime returns this process's user+system CPU time, children included
// (the zstd program), so results can be compared on a busy machine.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// report adds throughput per wall second and CPU seconds per op.
func report(b *testing.B, wall, cpu time.Duration) {
	secs := wall.Seconds() / float64(b.N)
	b.ReportMetric(benchSize/1e6/secs, "MB/s")
	b.ReportMetric(benchData/1e6/secs, "data-MB/s")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

func BenchmarkWrite(b *testing.B) {
	src := benchDisk(b)
	stores := []struct {
		name string
		open func(b *testing.B) objstore.Store
	}{
		{"fs", func(b *testing.B) objstore.Store { s, _ := newFS(b); return s }},
		{"discard", func(*testing.B) objstore.Store { return discardStore{} }},
		{"s3", func(b *testing.B) objstore.Store {
			// versitygw on loopback, sharing this machine's cores.
			s, err := s3.New(s3test.Start(b))
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			store := st.open(b)
			var stored int64
			var wall, cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				bucket := objstoretest.NewBucket(b, store)
				b.StartTimer()
				start, cpu0 := time.Now(), cpuTime()
				res, err := archive.WriteFile(context.Background(), store, bucket, src, archive.Options{})
				if err != nil {
					b.Fatal(err)
				}
				wall += time.Since(start)
				cpu += cpuTime() - cpu0
				stored = res.Manifest.StoredBytes
			}
			report(b, wall, cpu)
			b.ReportMetric(float64(stored)/1e6, "stored-MB")
		})
	}
}

func BenchmarkRestore(b *testing.B) {
	src := benchDisk(b)
	store, bucket := newFS(b)
	res, err := archive.WriteFile(context.Background(), store, bucket, src, archive.Options{})
	if err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(b.TempDir(), "restored.img")
	start, cpu0 := time.Now(), cpuTime()
	for b.Loop() {
		if _, err := archive.Restore(context.Background(), store, bucket, res.Key, dst, archive.RestoreOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	report(b, time.Since(start), cpuTime()-cpu0)
}

// BenchmarkZstdCLI compresses the same file with the zstd program, output
// to /dev/null, for comparison.
func BenchmarkZstdCLI(b *testing.B) {
	if _, err := exec.LookPath("zstd"); err != nil {
		b.Skip("zstd not installed")
	}
	src := benchDisk(b)
	for _, args := range [][]string{{"-1", "-T1"}, {"-1", "-T2"}, {"-3", "-T1"}} {
		b.Run(args[0]+args[1], func(b *testing.B) {
			null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer null.Close()
			start, cpu0 := time.Now(), cpuTime()
			for b.Loop() {
				cmd := exec.Command("zstd", append(args, "-q", "-c", src)...)
				cmd.Stdout = null
				if err := cmd.Run(); err != nil {
					b.Fatalf("zstd %v: %v", args, err)
				}
			}
			report(b, time.Since(start), cpuTime()-cpu0)
		})
	}
	b.Run("sha256sum", func(b *testing.B) {
		start, cpu0 := time.Now(), cpuTime()
		for b.Loop() {
			if out, err := exec.Command("sha256sum", src).CombinedOutput(); err != nil {
				b.Fatalf("sha256sum: %v: %s", err, out)
			}
		}
		report(b, time.Since(start), cpuTime()-cpu0)
	})
}

// discardStore keeps nothing: Write through it measures hashing and
// compression alone.
type discardStore struct{}

var _ objstore.Store = discardStore{}

func (discardStore) EnsureBucket(context.Context, string) error { return nil }
func (discardStore) Put(_ context.Context, _, _ string, r io.Reader, _ int64) error {
	_, err := io.Copy(io.Discard, r)
	return err
}
func (discardStore) Get(context.Context, string, string) (io.ReadCloser, error) {
	return nil, objstore.ErrNotFound
}
func (discardStore) Stat(context.Context, string, string) (objstore.Info, error) {
	return objstore.Info{}, objstore.ErrNotFound
}
func (discardStore) Touch(context.Context, string, string) error  { return objstore.ErrNotFound }
func (discardStore) Delete(context.Context, string, string) error { return nil }
func (discardStore) List(context.Context, string, string) iter.Seq2[objstore.Info, error] {
	return func(func(objstore.Info, error) bool) {}
}
