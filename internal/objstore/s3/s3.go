// Package s3 is the object store over any S3-compatible endpoint (AWS S3,
// MinIO, versitygw, Ceph RGW, R2, ...), through minio-go. S3 already gives
// what the contract asks: a PUT or a completed multipart upload replaces an
// object atomically. Uploads of unknown size stream as multipart uploads in
// parts of Config.PartSize, so memory stays bounded by one part; a failed
// streamed upload is aborted, leaving no object and no parts behind.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/platinum-dev/platinum/internal/objstore"
)

// Config says where the S3 endpoint is and how to sign requests.
type Config struct {
	// Endpoint is the service URL, "https://host[:port]" or
	// "http://host[:port]" (plain HTTP only for a trusted network such as
	// loopback). A bare "host:port" means https.
	Endpoint string
	// Region is the signing region; most self-hosted servers accept the
	// default "us-east-1".
	Region string
	// AccessKey and SecretKey are static credentials.
	AccessKey string
	SecretKey string
	// PathStyle puts the bucket in the path (http://host/bucket/key), which
	// self-hosted servers need; false uses virtual-host style
	// (http://bucket.host/key), which AWS prefers.
	PathStyle bool
	// PartSize is the multipart part size for uploads of unknown size, and
	// the size above which known-size uploads go multipart. Each streamed
	// upload buffers one part in memory. S3 allows 5 MiB to 5 GiB.
	PartSize int64
	// MaxRetries bounds retries of one request on transient errors (minio-go
	// backs off between them); 1 disables retrying. An unreachable store
	// fails after roughly MaxRetries short waits, not minutes.
	MaxRetries int
}

// DefaultConfig returns a Config with the defaults filled in and no endpoint
// or credentials.
func DefaultConfig() Config {
	return Config{Region: "us-east-1", PartSize: 16 << 20, MaxRetries: 3}
}

// ConfigError reports an invalid Config field.
type ConfigError struct {
	Field string
	Err   error
}

// Error implements error.
func (e *ConfigError) Error() string { return "s3 config " + e.Field + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// Validate checks the config, returning a *ConfigError naming the first bad
// field.
func (c Config) Validate() error {
	if _, _, err := c.endpoint(); err != nil {
		return &ConfigError{Field: "Endpoint", Err: err}
	}
	if c.AccessKey == "" {
		return &ConfigError{Field: "AccessKey", Err: errors.New("empty")}
	}
	if c.SecretKey == "" {
		return &ConfigError{Field: "SecretKey", Err: errors.New("empty")}
	}
	if c.PartSize < 5<<20 || c.PartSize > 5<<30 {
		return &ConfigError{Field: "PartSize", Err: fmt.Errorf("%d is outside 5 MiB..5 GiB", c.PartSize)}
	}
	if c.MaxRetries < 1 {
		return &ConfigError{Field: "MaxRetries", Err: errors.New("must be at least 1")}
	}
	return nil
}

// endpoint splits Endpoint into minio-go's host[:port] and TLS flag.
func (c Config) endpoint() (host string, secure bool, err error) {
	if c.Endpoint == "" {
		return "", false, errors.New("empty")
	}
	raw := c.Endpoint
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		u, err = url.Parse("https://" + raw)
		if err != nil {
			return "", false, err
		}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", false, fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
		return "", false, fmt.Errorf("%q: want scheme://host[:port] only", raw)
	}
	return u.Host, u.Scheme == "https", nil
}

// Store is an objstore.Store over an S3-compatible endpoint.
type Store struct {
	client   *minio.Client
	core     minio.Core
	partSize uint64
}

var _ objstore.Store = (*Store)(nil)

// New returns a store for cfg. It does not contact the endpoint; the first
// call that does reports an unreachable one as objstore.ErrUnavailable.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host, secure, _ := cfg.endpoint()
	lookup := minio.BucketLookupDNS
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       secure,
		Region:       cfg.Region,
		BucketLookup: lookup,
		MaxRetries:   cfg.MaxRetries,
	})
	if err != nil {
		return nil, &ConfigError{Field: "Endpoint", Err: err}
	}
	return &Store{client: client, core: minio.Core{Client: client}, partSize: uint64(cfg.PartSize)}, nil
}

// EnsureBucket implements objstore.Store.
func (s *Store) EnsureBucket(ctx context.Context, bucket string) error {
	if err := objstore.ValidBucket(bucket); err != nil {
		return err
	}
	err := s.client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
	if err == nil {
		return nil
	}
	switch code(err) {
	case "BucketAlreadyOwnedByYou", "BucketAlreadyExists":
		// BucketAlreadyExists may mean another account owns it: check we
		// can use it rather than trusting the code.
		if ok, herr := s.client.BucketExists(ctx, bucket); herr == nil && ok {
			return nil
		}
	}
	return mapErr("ensure bucket "+bucket, err)
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, bucket, key string, r io.Reader, size int64) error {
	if err := objstore.Validate(bucket, key); err != nil {
		return err
	}
	if size < objstore.SizeUnknown {
		return fmt.Errorf("put %s/%s: size %d: %w", bucket, key, size, objstore.ErrInvalidArgument)
	}
	// An in-memory reader of the right length is passed as is: minio-go can
	// then rewind it to retry a request. Any other reader is checked for
	// its length as it streams.
	if lr, ok := r.(interface {
		io.Seeker
		Len() int
	}); ok && size >= 0 {
		if int64(lr.Len()) != size {
			return fmt.Errorf("put %s/%s: reader has %d bytes, size says %d: %w", bucket, key, lr.Len(), size, objstore.ErrInvalidArgument)
		}
	} else {
		r = objstore.ExactReader(r, size)
	}
	_, err := s.client.PutObject(ctx, bucket, key, r, size, minio.PutObjectOptions{
		PartSize:    s.partSize,
		ContentType: "application/octet-stream",
	})
	if err != nil {
		return mapErr("put "+bucket+"/"+key, err)
	}
	return nil
}

// Get implements objstore.Store. It sends the request at once, so a missing
// object is reported here rather than on the first Read.
func (s *Store) Get(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	if err := objstore.Validate(bucket, key); err != nil {
		return nil, err
	}
	body, _, _, err := s.core.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, mapErr("get "+bucket+"/"+key, err)
	}
	return body, nil
}

// Stat implements objstore.Store.
func (s *Store) Stat(ctx context.Context, bucket, key string) (objstore.Info, error) {
	if err := objstore.Validate(bucket, key); err != nil {
		return objstore.Info{}, err
	}
	oi, err := s.client.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return objstore.Info{}, mapErr("stat "+bucket+"/"+key, err)
	}
	return objstore.Info{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// Touch implements objstore.Store. It first copies the object onto itself
// with replaced metadata, which renews LastModified on AWS and MinIO without
// moving data through this process. Some servers (versitygw's posix
// backend) only rewrite metadata then; when a Stat shows LastModified did
// not advance, Touch rewrites the object with its own content. So do not
// Touch a key that another writer may be overwriting with different
// content; content-addressed chunks are safe.
func (s *Store) Touch(ctx context.Context, bucket, key string) error {
	before, err := s.Stat(ctx, bucket, key)
	if err != nil {
		return err
	}
	_, err = s.client.CopyObject(ctx,
		minio.CopyDestOptions{
			Bucket:          bucket,
			Object:          key,
			ReplaceMetadata: true,
			UserMetadata:    map[string]string{"Pt-Touched": strconv.FormatInt(time.Now().UnixNano(), 10)},
		},
		minio.CopySrcOptions{Bucket: bucket, Object: key})
	if err != nil {
		return mapErr("touch "+bucket+"/"+key, err)
	}
	after, err := s.Stat(ctx, bucket, key)
	if err != nil {
		return err
	}
	if after.ModTime.After(before.ModTime) {
		return nil
	}
	body, err := s.Get(ctx, bucket, key)
	if err != nil {
		return err
	}
	defer body.Close()
	return s.Put(ctx, bucket, key, body, after.Size)
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, bucket, key string) error {
	if err := objstore.Validate(bucket, key); err != nil {
		return err
	}
	err := s.client.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{})
	if err != nil && !errors.Is(mapErr("", err), objstore.ErrNotFound) {
		return mapErr("delete "+bucket+"/"+key, err)
	}
	return nil
}

// List implements objstore.Store with ListObjectsV2, 1000 keys a page.
func (s *Store) List(ctx context.Context, bucket, prefix string) iter.Seq2[objstore.Info, error] {
	return objstore.CheckedList(bucket, prefix, func(yield func(objstore.Info, error) bool) {
		// Cancelling stops minio-go's listing goroutine when the consumer
		// breaks early.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for oi := range s.client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if oi.Err != nil {
				yield(objstore.Info{}, mapErr("list "+bucket+"/"+prefix, oi.Err))
				return
			}
			if !yield(objstore.Info{Key: oi.Key, Size: oi.Size, ModTime: oi.LastModified}, nil) {
				return
			}
		}
		if err := ctx.Err(); err != nil {
			yield(objstore.Info{}, err)
		}
	})
}

// code returns the S3 error code of err, or "".
func code(err error) string {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.Code
	}
	return ""
}

// mapErr wraps err with op and the objstore category it belongs to.
// Errors that are already categorised (a reader's ErrInvalidArgument,
// context cancellation) pass through unchanged in the chain.
func mapErr(op string, err error) error {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch {
		case er.Code == "NoSuchKey" || er.Code == "NoSuchBucket" || er.Code == "NotFound" ||
			er.StatusCode == http.StatusNotFound:
			return fmt.Errorf("%s: %s: %w", op, er.Code, objstore.ErrNotFound)
		case er.Code == "InvalidBucketName" || er.Code == "KeyTooLongError" || er.Code == "InvalidArgument":
			return fmt.Errorf("%s: %v: %w", op, err, objstore.ErrInvalidArgument)
		case er.StatusCode >= 500 || er.Code == "SlowDown" || er.Code == "RequestTimeout":
			return fmt.Errorf("%s: %v: %w", op, err, objstore.ErrUnavailable)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	if errors.Is(err, objstore.ErrInvalidArgument) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: %w: %w", op, objstore.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
