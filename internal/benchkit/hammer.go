package benchkit

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Hammer sends GETs to url through hc from conns goroutines for d and
// returns every request's latency. token, if set, goes as the bearer. Any
// answer but 200 is an error, and so is no answer at all.
func Hammer(hc *http.Client, url, token string, conns int, d time.Duration) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	var all []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			var mine []time.Duration
			defer func() {
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				req, _ := http.NewRequest("GET", url, nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("answered %d", resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
		})
	}
	wg.Wait()
	if len(all) == 0 && firstErr == nil {
		firstErr = fmt.Errorf("no answer in %s", d)
	}
	return all, firstErr
}
