package objstore

import (
	"fmt"
	"io"
	"iter"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key accepted, S3's limit.
const MaxKeyLen = 1024

// maxSegmentLen keeps every path segment a valid file name (NAME_MAX).
const maxSegmentLen = 255

// ValidBucket returns nil if name is a bucket name every implementation
// accepts: 3 to 63 characters of lower-case letters, digits and hyphens,
// starting and ending with a letter or digit. That is the subset of S3's
// rules that also works with virtual-host addressing over TLS (no dots) and
// as a directory name. Otherwise it returns an error wrapping
// ErrInvalidArgument.
func ValidBucket(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("bucket %q: length must be 3 to 63: %w", name, ErrInvalidArgument)
	}
	for i, c := range []byte(name) {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(name)-1) {
			return fmt.Errorf("bucket %q: only a-z, 0-9 and inner '-': %w", name, ErrInvalidArgument)
		}
	}
	return nil
}

// ValidKey returns nil if key is a key every implementation accepts, and an
// error wrapping ErrInvalidArgument otherwise. A key is 1 to MaxKeyLen bytes
// of UTF-8 without control characters, made of '/'-separated segments that
// are non-empty, at most 255 bytes, and neither "." nor "..": so it maps to
// a relative path inside the bucket's directory on a file system and cannot
// escape it.
func ValidKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("key %q: length must be 1 to %d: %w", key, MaxKeyLen, ErrInvalidArgument)
	}
	if err := validChars(key); err != nil {
		return err
	}
	for seg := range strings.SplitSeq(key, "/") {
		if err := validSegment(key, seg); err != nil {
			return err
		}
	}
	return nil
}

// ValidPrefix returns nil if prefix may be passed to List: empty, or a
// string whose segments before the last '/' are valid key segments (the
// last, partial segment may be anything a key segment may start with).
// Otherwise it returns an error wrapping ErrInvalidArgument.
func ValidPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > MaxKeyLen {
		return fmt.Errorf("prefix %q: longer than %d: %w", prefix, MaxKeyLen, ErrInvalidArgument)
	}
	if err := validChars(prefix); err != nil {
		return err
	}
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return nil
	}
	for seg := range strings.SplitSeq(prefix[:i], "/") {
		if err := validSegment(prefix, seg); err != nil {
			return err
		}
	}
	return nil
}

func validChars(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("key %q: not UTF-8: %w", s, ErrInvalidArgument)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("key %q: control character: %w", s, ErrInvalidArgument)
		}
	}
	return nil
}

func validSegment(key, seg string) error {
	switch {
	case seg == "":
		return fmt.Errorf("key %q: empty segment (leading, trailing or double '/'): %w", key, ErrInvalidArgument)
	case seg == "." || seg == "..":
		return fmt.Errorf("key %q: %q segment: %w", key, seg, ErrInvalidArgument)
	case len(seg) > maxSegmentLen:
		return fmt.Errorf("key %q: segment longer than %d: %w", key, maxSegmentLen, ErrInvalidArgument)
	}
	return nil
}

// Validate checks a bucket and key together, the first thing every method
// of an implementation does.
func Validate(bucket, key string) error {
	if err := ValidBucket(bucket); err != nil {
		return err
	}
	return ValidKey(key)
}

// ValidateList checks a List's arguments, as Validate does an object's:
// every Store refuses the same bad listings with the same errors.
func ValidateList(bucket, prefix string) error {
	if err := ValidBucket(bucket); err != nil {
		return err
	}
	return ValidPrefix(prefix)
}

// CheckedList is list behind ValidateList: a listing of the one error when
// bucket or prefix is bad, so every Store's List refuses bad arguments the
// same way before it touches anything.
func CheckedList(bucket, prefix string, list iter.Seq2[Info, error]) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		if err := ValidateList(bucket, prefix); err != nil {
			yield(Info{}, err)
			return
		}
		list(yield)
	}
}

// ExactReader returns a reader that yields r's bytes and fails with an
// error wrapping ErrInvalidArgument if r ends before size bytes or has more
// than size. The check for extra bytes happens before the last expected
// bytes are handed out, and the Read that would deliver them returns only
// the error: so a consumer that stops at size (as S3 clients and
// io.ReadFull do, dropping an error that comes with a full buffer) still
// fails before it commits the object. A negative size returns r unchanged.
func ExactReader(r io.Reader, size int64) io.Reader {
	if size < 0 {
		return r
	}
	return &exactReader{r: r, left: size, size: size}
}

type exactReader struct {
	r    io.Reader
	left int64
	size int64
	err  error // sticky: io.EOF once done, or the failure
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if e.left == 0 {
		return 0, e.checkEnd()
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	switch {
	case e.left == 0:
		if cerr := e.checkEnd(); cerr != io.EOF {
			return 0, cerr // withhold the last bytes: see ExactReader
		}
		return n, nil
	case err == io.EOF:
		e.err = fmt.Errorf("reader ended %d bytes short of size %d: %w", e.left, e.size, ErrInvalidArgument)
		return n, e.err
	case err != nil:
		e.err = err
		return n, err
	}
	return n, nil
}

// checkEnd reads one byte past size: io.EOF means r had exactly size bytes;
// anything else is r being longer than announced, or r's own error.
func (e *exactReader) checkEnd() error {
	var b [1]byte
	for {
		n, err := e.r.Read(b[:])
		switch {
		case n > 0:
			e.err = fmt.Errorf("reader yields more than size %d: %w", e.size, ErrInvalidArgument)
		case err == io.EOF:
			e.err = io.EOF
		case err != nil:
			e.err = err
		default:
			continue
		}
		return e.err
	}
}
