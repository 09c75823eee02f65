package ptdtest

import "testing"

// TestPanicOrTail: a log with a panic is shown from the panic's line, one
// without by its tail.
func TestPanicOrTail(t *testing.T) {
	for _, tc := range []struct{ log, want string }{
		{"a\nb\nc\nd", "c\nd"},
		{"a\nb\n2026/12/05 http: panic serving 1.2.3.4: boom\ngoroutine 1\nx\ny", "2026/12/05 http: panic serving 1.2.3.4: boom\ngoroutine 1"},
		{"a\npanic: boom\n\ngoroutine 1", "panic: boom\n"},
	} {
		if got := PanicOrTail(tc.log, 2); got != tc.want {
			t.Errorf("PanicOrTail(%q) = %q, want %q", tc.log, got, tc.want)
		}
	}
}
