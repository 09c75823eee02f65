package fs_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/platinum-dev/platinum/internal/objstore/fs"
)

// BenchmarkPut4M measures one archive-chunk-sized atomic Put (fsyncs included).
func BenchmarkPut4M(b *testing.B) {
	s, _ := fs.Open(b.TempDir())
	s.EnsureBucket(context.Background(), "bkt")
	data := bytes.Repeat([]byte{1, 2, 3, 4}, 1<<20)
	b.SetBytes(int64(len(data)))
	i := 0
	for b.Loop() {
		i++
		if err := s.Put(context.Background(), "bkt", fmt.Sprintf("chunks/%d", i), bytes.NewReader(data), int64(len(data))); err != nil {
			b.Fatal(err)
		}
	}
}
