package ptdtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Response is one answer of ptd's HTTP API as the suites' raw-HTTP
// clients keep it: the status, the headers and the whole body.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as an object (nil when it is not one).
func (r Response) JSON() map[string]any {
	var m map[string]any
	json.Unmarshal(r.Body, &m)
	return m
}

// List decodes the body as an array of objects (nil when it is not one).
func (r Response) List() []map[string]any {
	var l []map[string]any
	json.Unmarshal(r.Body, &l)
	return l
}

// Body is a request body from what a test passes: none for nil, a string,
// []byte or io.Reader as it is (a test of malformed input sends its own
// bytes), anything else as JSON.
func Body(body any) io.Reader {
	switch b := body.(type) {
	case nil:
		return nil
	case string:
		return strings.NewReader(b)
	case []byte:
		return bytes.NewReader(b)
	case io.Reader:
		return b
	default:
		js, _ := json.Marshal(b)
		return bytes.NewReader(js)
	}
}

// JSONBody is body as JSON, whatever its type, or none for nil.
func JSONBody(body any) io.Reader {
	if body == nil {
		return nil
	}
	b, _ := json.Marshal(body)
	return bytes.NewReader(b)
}

// Send sends req with hc (http.DefaultClient when nil) and reads the
// whole answer.
func Send(hc *http.Client, req *http.Request) (Response, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}
