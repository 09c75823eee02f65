package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/objstore/s3"
)

// TestFailedStreamLeavesNoUpload: a streamed Put whose reader fails after
// some parts went up aborts its multipart upload, so no parts linger
// (billed, invisible to List) on the server.
func TestFailedStreamLeavesNoUpload(t *testing.T) {
	s, b := smallPartBucket(t)
	ctx := context.Background()
	errBroken := errors.New("broken source")
	src := io.MultiReader(bytes.NewReader(make([]byte, 12<<20)), &errReader{errBroken})
	if err := s.Put(ctx, b, "k", src, objstore.SizeUnknown); !errors.Is(err, errBroken) {
		t.Fatalf("Put = %v, want the reader's error", err)
	}
	for u := range s3.MinioClient(s).ListIncompleteUploads(ctx, b, "", true) {
		if u.Err != nil {
			t.Fatalf("ListIncompleteUploads: %v", u.Err)
		}
		t.Errorf("upload %s of %s left behind", u.UploadID, u.Key)
	}
	if _, err := s.Stat(ctx, b, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Stat after failed Put = %v, want ErrNotFound", err)
	}
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }
