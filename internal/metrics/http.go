package metrics

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Route labels for requests no pattern names.
const (
	// RouteUnmatched is a request no route matched (a 404 or 405 of the
	// router): its raw path is never a label, so a scanner cannot blow up
	// the series count.
	RouteUnmatched = "unmatched"
)

type routeKey struct{}

// route is where the router's handler writes the pattern it matched, for
// the middleware above it to read once the request is answered.
type route struct{ pattern string }

// SetRoute names the route template of the request being served (the
// ServeMux pattern, e.g. "GET /v1/sandboxes/{id}"). Handlers registered on
// a mux call it; outside Instrument it does nothing.
func SetRoute(ctx context.Context, pattern string) {
	if rt, ok := ctx.Value(routeKey{}).(*route); ok {
		rt.pattern = pattern
	}
}

// Instrumented reports whether ctx is already inside Instrument, so a
// handler that instruments itself when served alone (tests) does not count
// a request twice when ptd wraps it again.
func Instrumented(ctx context.Context) bool {
	_, ok := ctx.Value(routeKey{}).(*route)
	return ok
}

// Instrument counts and times every request next answers, labelled by the
// route SetRoute named (RouteUnmatched when none did).
func Instrument(next http.Handler) http.Handler { return InstrumentLog(nil, next) }

// InstrumentLog is Instrument that also writes one access line per request
// to logger (nil: none) with its context, so the request id the requestid
// middleware put there is on it: method, route template, status and
// duration, at Info for answers of 400 and above and at Debug otherwise
// (ptd --log-level debug shows every request; a refused or failed one is
// always there to find by the id the client saw).
func InstrumentLog(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Instrumented(r.Context()) {
			next.ServeHTTP(w, r)
			return
		}
		// One allocation holds the status and the route SetRoute writes.
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		defer func() {
			p := sw.route.pattern
			if p == "" {
				p = RouteUnmatched
			}
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			took := time.Since(start)
			s := seriesFor(p, r.Method, code)
			s.requests.Inc()
			s.duration.Observe(took.Seconds())
			if logger == nil {
				return
			}
			lvl := slog.LevelDebug
			if code >= 400 {
				lvl = slog.LevelInfo
			}
			// Checked first so a line that is not written (a 2xx at the
			// default level) costs no arguments.
			if logger.Enabled(r.Context(), lvl) {
				logger.Log(r.Context(), lvl, "request", "method", r.Method, "route", p, "status", code,
					"duration_ms", float64(took.Microseconds())/1000)
			}
		}()
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), routeKey{}, &sw.route)))
	})
}

// series are one route, method and status's children of the HTTP
// families, looked up once: WithLabelValues hashes and checks its labels
// on every call, and formatting the code allocated.
type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

type seriesKey struct {
	route, method string
	code          int
}

// seriesCache holds up to maxCachedSeries series; past that (a client
// making up methods) the rest are looked up each time, as before.
var (
	seriesCache  sync.Map // seriesKey -> *series
	seriesCached atomic.Int64
)

const maxCachedSeries = 4096

func seriesFor(route, method string, code int) *series {
	k := seriesKey{route, method, code}
	if s, ok := seriesCache.Load(k); ok {
		return s.(*series)
	}
	s := &series{
		requests: httpRequests.WithLabelValues(route, method, strconv.Itoa(code)),
		duration: httpDuration.WithLabelValues(route, method),
	}
	if seriesCached.Add(1) <= maxCachedSeries {
		if prev, loaded := seriesCache.LoadOrStore(k, s); loaded {
			seriesCached.Add(-1)
			return prev.(*series)
		}
	} else {
		seriesCached.Add(-1)
	}
	return s
}

// statusWriter remembers the status code. It passes Flush and Hijack
// through (event streams and exec output flush; the envd proxy may
// upgrade), and Unwrap for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
	route  route
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
