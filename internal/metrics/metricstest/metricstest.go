// Package metricstest reads ptd's process-wide metric families in tests:
// one series' value from a scrape of metrics.Handler, so a test can assert
// what an operation recorded by comparing the value before and after.
package metricstest

import (
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/metrics"
)

// Value is the value of series, written as the exposition format writes it
// (name{label="v",...} with labels in name order), in a scrape of the
// process-wide families; 0 when the series does not exist yet.
func Value(tb testing.TB, series string) float64 {
	tb.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, err := io.ReadAll(rec.Body)
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("series %s: %q", series, line)
			}
			return f
		}
	}
	return 0
}
