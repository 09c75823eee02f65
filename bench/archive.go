package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/platinum-dev/platinum/internal/archive"
	"github.com/platinum-dev/platinum/internal/benchkit"
	objfs "github.com/platinum-dev/platinum/internal/objstore/fs"
)

// archiveBench measures archive and unarchive throughput for a 1 GiB disk
// image holding 500 MiB of data (half random, half repetitive text), beside
// plain `zstd -1` of the same bytes, runs times each. Throughput is the
// image size over the wall time.
func archiveBench(runs int) error {
	dir, err := os.MkdirTemp("/var/tmp", "pt-bench-archive-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	img := filepath.Join(dir, "disk.img")
	const size, data = 1 << 30, 500 << 20
	f, err := os.Create(img)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	text := []byte("the quick brown fox jumps over the lazy dog; platinum sandboxes archive fast\n")
	for i := 0; i < data>>20; i++ {
		if i%2 == 0 {
			rand.Read(buf)
		} else {
			for j := range buf {
				buf[j] = text[(j+i)%len(text)]
			}
		}
		// Spread the data over the image, leaving holes between.
		if _, err := f.WriteAt(buf, int64(i)*2<<20); err != nil {
			return err
		}
	}
	f.Truncate(size)
	f.Close()

	var arch, unarch, zstd []time.Duration
	for r := 0; r < runs; r++ {
		st, err := objfs.Open(filepath.Join(dir, fmt.Sprint("objects", r)))
		if err != nil {
			return err
		}
		ctx := context.Background()
		st.EnsureBucket(ctx, "bench")
		t0 := time.Now()
		res, err := archive.WriteFile(ctx, st, "bench", img, archive.Options{})
		if err != nil {
			return err
		}
		arch = append(arch, time.Since(t0))
		t1 := time.Now()
		if _, err := archive.Restore(ctx, st, "bench", res.Key, filepath.Join(dir, "restored.img"), archive.RestoreOptions{}); err != nil {
			return err
		}
		unarch = append(unarch, time.Since(t1))
		os.Remove(filepath.Join(dir, "restored.img"))
		os.RemoveAll(filepath.Join(dir, fmt.Sprint("objects", r)))
		t2 := time.Now()
		if out, err := exec.Command("zstd", "-1", "-q", "-f", "-o", filepath.Join(dir, "disk.zst"), img).CombinedOutput(); err != nil {
			return fmt.Errorf("zstd: %v: %s", err, out)
		}
		zstd = append(zstd, time.Since(t2))
		os.Remove(filepath.Join(dir, "disk.zst"))
	}
	mbps := func(ds []time.Duration) string {
		p := benchkit.Percentiles(ds)
		return fmt.Sprintf("p50 %7.0f MB/s (%s)", float64(size)/1e6/p[0].Seconds(), benchkit.MS(p[0]))
	}
	fmt.Printf("%-40s n=%-4d %s\n", "archive 1 GiB disk, 500 MiB data", runs, mbps(arch))
	fmt.Printf("%-40s n=%-4d %s\n", "unarchive (restore) of the same", runs, mbps(unarch))
	fmt.Printf("%-40s n=%-4d %s   archive/zstd time ratio %.2fx\n", "plain zstd -1 of the same bytes", runs, mbps(zstd),
		float64(benchkit.Percentiles(arch)[0])/float64(benchkit.Percentiles(zstd)[0]))
	return nil
}
