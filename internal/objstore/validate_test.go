package objstore_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

func TestErrorCategories(t *testing.T) {
	tests := []struct {
		err, category error
	}{
		{objstore.ErrNotFound, sandbox.ErrNotFound},
		{objstore.ErrInvalidArgument, sandbox.ErrInvalidArgument},
		{objstore.ErrConflict, sandbox.ErrConflict},
		{objstore.ErrUnavailable, sandbox.ErrUnavailable},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, tc.category) {
			t.Errorf("%v does not wrap %v", tc.err, tc.category)
		}
	}
	if errors.Is(sandbox.ErrNotFound, objstore.ErrNotFound) {
		t.Error("a missing sandbox reads as a missing object")
	}
}

// validCase is an argument of a validator and whether it is accepted.
type validCase struct {
	in string
	ok bool
}

// checkValid checks that validate, called fn in failures, accepts exactly
// the ok cases and refuses the others with ErrInvalidArgument (what the
// stores answer a bad name with).
func checkValid(t *testing.T, fn string, validate func(string) error, tests []validCase) {
	t.Helper()
	for _, tc := range tests {
		err := validate(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%s(%q) = %v, want ok=%v", fn, tc.in, err, tc.ok)
		}
		if err != nil && !errors.Is(err, objstore.ErrInvalidArgument) {
			t.Errorf("%s(%q) = %v, not ErrInvalidArgument", fn, tc.in, err)
		}
	}
}

func TestValidKey(t *testing.T) {
	checkValid(t, "ValidKey", objstore.ValidKey, []validCase{
		{"k", true},
		{"chunks/0123", true},
		{"a/b/c.json", true},
		{".hidden", true},
		{"a/..b", true},
		{"", false},
		{"/abs", false},
		{"..", false},
		{"../x", false},
		{"a/../b", false},
		{"./a", false},
		{"a/", false},
		{"a//b", false},
		{"a\x00b", false},
		{"a\tb", false},
		{"\xff", false},
		{strings.Repeat("x", 256), false},
		{strings.Repeat("x/", 512) + "x", false},
	})
}

func TestValidBucket(t *testing.T) {
	checkValid(t, "ValidBucket", objstore.ValidBucket, []validCase{
		{"abc", true},
		{"platinum-archives", true},
		{"0-9", true},
		{"ab", false},
		{strings.Repeat("a", 64), false},
		{"-ab", false},
		{"ab-", false},
		{"Abc", false},
		{"a.b.c", false},
		{".tmp", false},
		{"a_b", false},
	})
}

func TestValidPrefix(t *testing.T) {
	checkValid(t, "ValidPrefix", objstore.ValidPrefix, []validCase{
		{"", true},
		{"chunks/", true},
		{"chunks/ab", true},
		{"chunks", true},
		{"a/.", true},
		{"/", false},
		{"../", false},
		{"a//", false},
		{"a/../b", false},
	})
}

func TestExactReader(t *testing.T) {
	tests := []struct {
		name    string
		data    int
		size    int64
		wantErr error
	}{
		{"exact", 100, 100, nil},
		{"empty", 0, 0, nil},
		{"short", 99, 100, objstore.ErrInvalidArgument},
		{"long", 101, 100, objstore.ErrInvalidArgument},
		{"unknown", 50, objstore.SizeUnknown, nil},
	}
	for _, tc := range tests {
		for _, oneByte := range []bool{false, true} {
			var src io.Reader = bytes.NewReader(bytes.Repeat([]byte{7}, tc.data))
			if oneByte {
				src = iotest.OneByteReader(src)
			}
			got, err := io.ReadAll(objstore.ExactReader(src, tc.size))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("%s (one byte reads %v): err = %v, want %v", tc.name, oneByte, err, tc.wantErr)
			}
			if tc.wantErr == nil && len(got) != tc.data {
				t.Errorf("%s: read %d bytes, want %d", tc.name, len(got), tc.data)
			}
		}
	}
}

// TestExactReaderStopsAtSize: a consumer that reads exactly size bytes and
// never asks again still learns the source was longer.
func TestExactReaderStopsAtSize(t *testing.T) {
	r := objstore.ExactReader(bytes.NewReader(make([]byte, 11)), 10)
	buf := make([]byte, 10)
	_, err := io.ReadFull(r, buf)
	if !errors.Is(err, objstore.ErrInvalidArgument) {
		t.Fatalf("ReadFull of exactly size bytes from a longer source: %v, want ErrInvalidArgument", err)
	}
}
