// Command netprobe runs inside sandboxes for the network policy and egress
// tests: it dials, fetches and resolves, and prints one word that says how
// it went (ok, refused, reset, timeout, unreachable, notfound, error), so
// the tests can tell a refusal from a hang without timing anything.
//
//	netprobe dial ADDR            connect, read one line
//	netprobe get URL [ENVNAME]    GET with "Authorization: Bearer $ENVNAME"
//	netprobe post URL ENVNAME     POST the env value as the body (and header)
//	netprobe tls ADDR SNI         TLS handshake with SNI (system roots)
//	netprobe resolve NAME
//	netprobe hold URL ENVNAME     get, then stay alive (memory inspection)
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Println("error: usage")
		os.Exit(2)
	}
	arg := os.Args[2]
	env := ""
	if len(os.Args) > 3 && os.Args[1] != "tls" {
		env = os.Getenv(os.Args[3])
	}
	switch os.Args[1] {
	case "dial":
		c, err := net.DialTimeout("tcp4", arg, 20*time.Second)
		if err != nil {
			fmt.Println(classify(err))
			return
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil && line == "" {
			fmt.Println(classify(err))
			return
		}
		fmt.Println("ok " + strings.TrimSpace(line))
	case "get", "post", "hold":
		method, body := "GET", ""
		if os.Args[1] == "post" {
			method, body = "POST", env
		}
		req, _ := http.NewRequest(method, arg, strings.NewReader(body))
		if env != "" {
			req.Header.Set("Authorization", "Bearer "+env)
		}
		c := &http.Client{Timeout: 20 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			fmt.Println(classify(err))
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("ok %d %s\n", resp.StatusCode, strings.TrimSpace(string(b)))
		if os.Args[1] == "hold" {
			os.Stdout.Sync()
			time.Sleep(time.Hour)
		}
	case "tls":
		d := &net.Dialer{Timeout: 20 * time.Second}
		sni := ""
		if len(os.Args) > 3 {
			sni = os.Args[3]
		}
		c, err := tls.DialWithDialer(d, "tcp4", arg, &tls.Config{ServerName: sni, InsecureSkipVerify: sni == ""})
		if err != nil {
			var ue x509.UnknownAuthorityError
			if errors.As(err, &ue) {
				fmt.Println("untrusted")
				return
			}
			fmt.Println(classify(err))
			return
		}
		c.Close()
		fmt.Println("ok")
	case "resolve":
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, arg)
		if err != nil {
			var de *net.DNSError
			if errors.As(err, &de) && de.IsNotFound {
				fmt.Println("notfound")
				return
			}
			fmt.Println(classify(err))
			return
		}
		fmt.Println("ok " + strings.Join(addrs, ","))
	default:
		fmt.Println("error: unknown command")
		os.Exit(2)
	}
}

// classify names what went wrong.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF):
		return "eof"
	}
	return "error: " + err.Error()
}
