// Command previewsrv is the server the preview tests run inside a sandbox
// (built static, copied in through the files API): plain answers,
// incremental streams, uploads and downloads of any size, a gRPC-shaped
// answer over h2c, and a minimal RFC 6455 WebSocket echo, all with the standard library only.
package main

import (
	"bufio"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"time"
)

func main() {
	addr := flag.String("listen", ":8080", "address")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s %s host=%s token=%q cookie=%q", r.Method, r.URL.RequestURI(), r.Host,
			r.Header.Get("X-Pt-Preview-Token"), r.Header.Get("Cookie"))
	})
	// /stream writes n lines, one every ms milliseconds.
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range n {
			fmt.Fprintf(w, "data: %d %d\n\n", i, time.Now().UnixNano())
			w.(http.Flusher).Flush()
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
	})
	// /upload answers the body's size and SHA-256.
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, "%d %s", n, hex.EncodeToString(h.Sum(nil)))
	})
	// /download?n= streams n bytes (a repeating pattern).
	mux.HandleFunc("/download", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 256<<10)
		for i := range buf {
			buf[i] = byte(i)
		}
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	// /grpc answers as a gRPC server does (a trailer after the body),
	// saying which HTTP version reached it.
	mux.HandleFunc("/grpc", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		fmt.Fprintf(w, "HTTP/%d got %s", r.ProtoMajor, body)
		w.Header().Set("Grpc-Status", "0")
	})
	mux.HandleFunc("/ws", wsEcho)
	srv := &http.Server{Addr: *addr, Handler: mux, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true) // h2c, as gRPC servers speak
	log.Fatal(srv.ListenAndServe())
}

// wsEcho accepts a WebSocket and echoes every text or binary frame.
func wsEcho(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Sec-WebSocket-Key")
	if r.Header.Get("Upgrade") != "websocket" || key == "" {
		http.Error(w, "websocket only", 400)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		base64.StdEncoding.EncodeToString(sum[:]))
	brw.Flush()
	for {
		op, payload, err := readFrame(brw.Reader)
		if err != nil || op == 8 {
			return
		}
		if err := writeFrame(brw.Writer, op, payload); err != nil {
			return
		}
	}
}

func readFrame(r *bufio.Reader) (op byte, payload []byte, err error) {
	var h [2]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return
	}
	op = h[0] & 0x0f
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err = io.ReadFull(r, b[:]); err != nil {
			return
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err = io.ReadFull(r, b[:]); err != nil {
			return
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	var mask [4]byte
	if h[1]&0x80 != 0 {
		if _, err = io.ReadFull(r, mask[:]); err != nil {
			return
		}
	}
	if n > 16<<20 {
		return 0, nil, fmt.Errorf("frame too large")
	}
	payload = make([]byte, n)
	if _, err = io.ReadFull(r, payload); err != nil {
		return
	}
	for i := range payload {
		payload[i] ^= mask[i%4]
	}
	return op, payload, nil
}

func writeFrame(w *bufio.Writer, op byte, payload []byte) error {
	w.WriteByte(0x80 | op)
	switch n := len(payload); {
	case n < 126:
		w.WriteByte(byte(n))
	case n < 1<<16:
		w.WriteByte(126)
		binary.Write(w, binary.BigEndian, uint16(n))
	default:
		w.WriteByte(127)
		binary.Write(w, binary.BigEndian, uint64(n))
	}
	w.Write(payload)
	return w.Flush()
}
