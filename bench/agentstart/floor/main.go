// Command floor is the least a Go init can do under agentstart: listen on
// PT_AGENT_ADDR (default :49983) and accept connections, nothing else. Its
// time to listening under runsc is what any Go agent pays before its own
// code runs (bench/README.md, "A gVisor init's start"); build it static:
// CGO_ENABLED=0 go build -o /tmp/floor ./bench/agentstart/floor.
//
// FLOOR_SIGNALS=1 makes it ask for SIGTERM (signal.Notify) before it
// listens, as pt-agent does first thing: the difference is what os/signal's
// start costs under runsc.
package main

import (
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	addr := os.Getenv("PT_AGENT_ADDR")
	if addr == "" {
		addr = ":49983"
	}
	if os.Getenv("FLOOR_SIGNALS") == "1" {
		signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		c.Close()
	}
}
