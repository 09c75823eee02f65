// Command counter is the test server of custom template tests: an HTTP
// server whose answers count its requests in memory ("count=N start=T",
// T its start time in Unix nanoseconds), so a test can tell a restored
// process (the count and start go on) from a fresh one. -get ADDR prints
// one answer; -probe ADDR exits 0 once one comes (a ready_cmd).
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "", "serve on this address")
	get := flag.String("get", "", "print one answer from this address")
	probe := flag.String("probe", "", "exit 0 if this address answers")
	flag.Parse()
	switch {
	case *addr != "":
		start := time.Now().UnixNano()
		var n atomic.Int64
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "count=%d start=%d\n", n.Add(1), start)
		})
		fmt.Fprintln(os.Stderr, http.ListenAndServe(*addr, nil))
		os.Exit(1)
	case *get != "" || *probe != "":
		target := *get + *probe
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get("http://" + target + "/")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if *get != "" {
			os.Stdout.Write(b)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}
