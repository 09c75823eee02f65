package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/platinum-dev/platinum/internal/events"
	"github.com/platinum-dev/platinum/internal/hostjoin"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/remote"
)

// serveHosts serves, in front of next, what hosts joining this ptd reach
// with the host token (docs/ARCHITECTURE.md, "Joined hosts"): the join
// answer (info) and the store st. A commit anywhere wakes feed, and each
// wake is passed on to the hosts listening for events.
func serveHosts(next http.Handler, info hostjoin.Info, st store.Store, feed *events.Feed, token string, log *slog.Logger) http.Handler {
	auth := hostjoin.Authorizer(token)
	join := hostjoin.Handler(info, auth)
	stores := remote.NewHandler(st, auth, func(ctx context.Context, notify func()) {
		wake := feed.Wake()
		for {
			select {
			case <-wake:
				wake = feed.Wake() // before notifying: a commit meanwhile wakes again
				notify()
			case <-ctx.Done():
				return
			}
		}
	}, log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == hostjoin.Path:
			join.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, remote.Prefix):
			stores.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
