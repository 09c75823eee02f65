package s3_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/objstore/objstoretest"
	"github.com/platinum-dev/platinum/internal/objstore/s3"
	"github.com/platinum-dev/platinum/internal/objstore/s3/s3test"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// newStore is s3.New(cfg), failing the test on error.
func newStore(t *testing.T, cfg s3.Config) *s3.Store {
	t.Helper()
	s, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// smallPartBucket is a store on a test server with 5 MiB parts, so a
// few MiB go multipart, and a fresh bucket on it.
func smallPartBucket(t *testing.T) (*s3.Store, string) {
	t.Helper()
	cfg := s3test.Start(t)
	cfg.PartSize = 5 << 20
	s := newStore(t, cfg)
	return s, objstoretest.NewBucket(t, s)
}

func TestConformance(t *testing.T) {
	cfg := s3test.Start(t)
	s := newStore(t, cfg)
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return s })
}

func TestSmallPartsMultipart(t *testing.T) {
	// A known size above PartSize goes multipart; 5 MiB parts keep it small.
	s, b := smallPartBucket(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), (11<<20)/16+5)
	for _, size := range []int64{int64(len(data)), objstore.SizeUnknown} {
		if err := s.Put(ctx, b, "k", struct{ *bytes.Reader }{bytes.NewReader(data)}, size); err != nil {
			t.Fatalf("Put (size %d): %v", size, err)
		}
		info, err := s.Stat(ctx, b, "k")
		if err != nil || info.Size != int64(len(data)) {
			t.Fatalf("Stat = %+v, %v; want size %d", info, err, len(data))
		}
	}
}

func TestUnreachable(t *testing.T) {
	addr := testenv.RefusedAddr(t)
	cfg := s3.DefaultConfig()
	cfg.Endpoint, cfg.AccessKey, cfg.SecretKey, cfg.PathStyle = "http://"+addr, "a", "b", true
	cfg.MaxRetries = 1
	s := newStore(t, cfg)
	ctx := context.Background()
	err := s.Put(ctx, "bucket", "k", bytes.NewReader([]byte("x")), 1)
	if !errors.Is(err, objstore.ErrUnavailable) {
		t.Errorf("Put to a closed port = %v, want ErrUnavailable", err)
	}
	_, err = s.Stat(ctx, "bucket", "k")
	if !errors.Is(err, objstore.ErrUnavailable) {
		t.Errorf("Stat on a closed port = %v, want ErrUnavailable", err)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := func() s3.Config {
		c := s3.DefaultConfig()
		c.Endpoint, c.AccessKey, c.SecretKey = "http://127.0.0.1:9000", "ak", "sk"
		return c
	}
	tests := []struct {
		name  string
		edit  func(*s3.Config)
		field string
	}{
		{"valid", func(*s3.Config) {}, ""},
		{"bare host is https", func(c *s3.Config) { c.Endpoint = "s3.example.com" }, ""},
		{"empty endpoint", func(c *s3.Config) { c.Endpoint = "" }, "Endpoint"},
		{"ftp scheme", func(c *s3.Config) { c.Endpoint = "ftp://host" }, "Endpoint"},
		{"endpoint with path", func(c *s3.Config) { c.Endpoint = "http://host/bucket" }, "Endpoint"},
		{"no access key", func(c *s3.Config) { c.AccessKey = "" }, "AccessKey"},
		{"no secret key", func(c *s3.Config) { c.SecretKey = "" }, "SecretKey"},
		{"tiny parts", func(c *s3.Config) { c.PartSize = 1 << 20 }, "PartSize"},
		{"no tries", func(c *s3.Config) { c.MaxRetries = 0 }, "MaxRetries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.edit(&c)
			err := c.Validate()
			var ce *s3.ConfigError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.field != "" && (!errors.As(err, &ce) || ce.Field != tc.field):
				t.Fatalf("Validate = %v, want ConfigError{Field: %s}", err, tc.field)
			}
		})
	}
}
