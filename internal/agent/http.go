package agent

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/agent/envscript"

	"golang.org/x/sys/unix"
)

// signedFiles reports whether a /files request carries a valid E2B
// pre-signed URL signature instead of the token header.
func (s *Server) signedFiles(r *http.Request) bool {
	if r.URL.Path != "/files" {
		return false
	}
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return false
	}
	var op string
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		op = "read"
	case http.MethodPost:
		op = "write"
	default:
		return false
	}
	s.mu.RLock()
	token := s.token
	s.mu.RUnlock()
	raw := q.Get("path") + ":" + op + ":" + q.Get("username") + ":" + token
	if exp := q.Get("signature_expiration"); exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || time.Now().Unix() > n {
			return false
		}
		raw += ":" + exp
	}
	return subtle.ConstantTimeCompare([]byte(sig), []byte(Signature(raw))) == 1
}

// Signature is E2B's file URL signature of the string
// "<path>:<read|write>:<username>:<token>[:<expiration>]".
func Signature(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
}

// filesAccount picks the user of a /files request: the username query
// parameter, else the Basic auth header, else the default user.
func (s *Server) filesAccount(r *http.Request) (*account, error) {
	if name := r.URL.Query().Get("username"); name != "" {
		return s.lookupAccount(name)
	}
	return s.accountFor(r.Header)
}

// filesPath is the file a read of GET /files or /artifact names in its
// required ?path=, resolved for the request's user (relative: from their
// home).
func (s *Server) filesPath(r *http.Request) (string, error) {
	acct, err := s.filesAccount(r)
	if err != nil {
		return "", err
	}
	q := r.URL.Query().Get("path")
	if q == "" {
		return "", fmt.Errorf("path: missing: %w", errInvalid)
	}
	return resolvePath(q, acct.home)
}

func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request) {
	p, err := s.filesPath(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	f, err := os.Open(p)
	if err != nil {
		writeErr(w, fmt.Errorf("open %s: %w", p, err))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeErr(w, err)
		return
	}
	if fi.IsDir() {
		writeErr(w, fmt.Errorf("%s: is a directory: %w", p, errInvalid))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": fi.Name()}))
	http.ServeContent(w, r, "", fi.ModTime(), f) // streams; handles Range
}

// uploadedFile is one element of POST /files's JSON answer.
type uploadedFile struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	acct, err := s.filesAccount(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	query := r.URL.Query().Get("path")
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var written []uploadedFile
	switch {
	case ct == "multipart/form-data":
		written, err = s.uploadMultipart(r, params["boundary"], query, acct)
	case ct == "application/octet-stream" || ct == "":
		if query == "" {
			err = fmt.Errorf("path: required for a raw upload: %w", errInvalid)
			break
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, gzErr := gzip.NewReader(r.Body)
			if gzErr != nil {
				err = fmt.Errorf("gzip body: %v: %w", gzErr, errInvalid)
				break
			}
			defer gz.Close()
			body = gz
		}
		var f uploadedFile
		f, err = writeUpload(query, body, acct)
		written = []uploadedFile{f}
	default:
		err = fmt.Errorf("content type %q: unsupported: %w", ct, errInvalid)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, written)
}

func (s *Server) uploadMultipart(r *http.Request, boundary, query string, acct *account) ([]uploadedFile, error) {
	if boundary == "" {
		return nil, fmt.Errorf("multipart: no boundary: %w", errInvalid)
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, fmt.Errorf("multipart: %v: %w", err, errInvalid)
	}
	var written []uploadedFile
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("multipart: %v: %w", err, errInvalid)
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		target := query
		if target == "" {
			// The raw filename is the target path; Part.FileName would
			// strip it to its base name.
			_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			target = params["filename"]
		}
		if target == "" {
			part.Close()
			return nil, fmt.Errorf("multipart: part without path or filename: %w", errInvalid)
		}
		f, err := writeUpload(target, part, acct)
		part.Close()
		if err != nil {
			return nil, err
		}
		written = append(written, f)
	}
	if len(written) == 0 {
		return nil, fmt.Errorf("multipart: no part named \"file\": %w", errInvalid)
	}
	return written, nil
}

// writeUpload streams r into path (created or truncated, parents created),
// owned by the account.
func writeUpload(path string, r io.Reader, acct *account) (uploadedFile, error) {
	p, err := resolvePath(path, acct.home)
	if err != nil {
		return uploadedFile{}, err
	}
	if err := mkdirAll(filepath.Dir(p), acct); err != nil {
		return uploadedFile{}, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return uploadedFile{}, fmt.Errorf("create %s: %w", p, err)
	}
	chown(p, acct)
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return uploadedFile{}, fmt.Errorf("write %s: %w", p, err)
	}
	return uploadedFile{Path: p, Name: filepath.Base(p), Type: "file"}, nil
}

func (s *Server) handleEnvs(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.sandboxEnv())
}

// initRequest is POST /init's body (the fields pt-agent uses).
type initRequest struct {
	EnvVars        map[string]string `json:"envVars"`
	AccessToken    *string           `json:"accessToken"`
	DefaultUser    string            `json:"defaultUser"`
	DefaultWorkdir string            `json:"defaultWorkdir"`
	// EnvScript, a Platinum field, asks the agent to write envVars to
	// Config.EnvScript as shell export lines, answering with
	// envscript.Header: ptd then needs no second request into the sandbox
	// for /etc/pt-env.
	EnvScript bool `json:"envScript"`
}

func (s *Server) handleInit(w http.ResponseWriter, r *http.Request) {
	var req initRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			writeErr(w, fmt.Errorf("init body: %v: %w", err, errInvalid))
			return
		}
	}
	if req.DefaultUser != "" {
		if _, err := s.lookupAccount(req.DefaultUser); err != nil {
			writeErr(w, fmt.Errorf("defaultUser: %v: %w", err, errInvalid))
			return
		}
	}
	if req.EnvScript && s.cfg.EnvScript != "" {
		if err := writeEnvScript(s.cfg.EnvScript, req.EnvVars); err != nil {
			writeErr(w, err)
			return
		}
		w.Header().Set(envscript.Header, "written")
	}
	s.mu.Lock()
	if req.EnvVars != nil {
		s.env = maps.Clone(req.EnvVars)
		if err := s.writeEnvFile(s.env); err != nil {
			s.log.Warn("env file", "err", err)
		}
	}
	if req.AccessToken != nil && *req.AccessToken != "" {
		s.token = *req.AccessToken
	}
	if req.DefaultUser != "" {
		s.user = req.DefaultUser
	}
	if req.DefaultWorkdir != "" {
		s.workdr = req.DefaultWorkdir
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// writeEnvScript replaces path with env's export lines, readable by every
// user as an upload would leave it, atomically: a shell sourcing it
// meanwhile reads the old file or the new one.
func writeEnvScript(path string, env map[string]string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(envscript.Render(env)), 0o644); err != nil {
		return fmt.Errorf("envScript: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("envScript: %w", err)
	}
	return nil
}

// metrics is GET /metrics's body, envd's field names.
type metrics struct {
	TS          int64   `json:"ts"`
	CPUCount    int     `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotal    uint64  `json:"mem_total"`
	MemUsed     uint64  `json:"mem_used"`
	MemCache    uint64  `json:"mem_cache"`
	MemTotalMiB uint64  `json:"mem_total_mib"`
	MemUsedMiB  uint64  `json:"mem_used_mib"`
	DiskUsed    uint64  `json:"disk_used"`
	DiskTotal   uint64  `json:"disk_total"`
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	m := metrics{TS: time.Now().Unix(), CPUCount: runtime.NumCPU()}
	m.CPUUsedPct = s.cpu.usedPct()
	if mem, err := readMeminfo(); err == nil {
		m.MemTotal = mem["MemTotal"]
		m.MemCache = mem["Cached"]
		if avail, ok := mem["MemAvailable"]; ok && avail <= m.MemTotal {
			m.MemUsed = m.MemTotal - avail
		}
		m.MemTotalMiB = m.MemTotal >> 20
		m.MemUsedMiB = m.MemUsed >> 20
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err == nil {
		m.DiskTotal = st.Blocks * uint64(st.Bsize)
		m.DiskUsed = (st.Blocks - st.Bfree) * uint64(st.Bsize)
	}
	writeJSON(w, http.StatusOK, m)
}

// readMeminfo returns /proc/meminfo in bytes.
func readMeminfo() (map[string]uint64, error) { return readMeminfoAt("/proc/meminfo") }

// readMeminfoAt reads a meminfo file: values in bytes.
func readMeminfoAt(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && fields[1] == "kB" {
			n <<= 10
		}
		out[key] = n
	}
	return out, sc.Err()
}

// cpuSampler turns /proc/stat counters into a usage percentage since the
// previous call (the first call samples over a short interval).
type cpuSampler struct {
	mu          sync.Mutex
	busy, total uint64
}

func (c *cpuSampler) usedPct() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	busy, total, err := readCPU()
	if err != nil {
		return 0
	}
	if c.total == 0 {
		time.Sleep(50 * time.Millisecond)
		c.busy, c.total = busy, total
		if busy, total, err = readCPU(); err != nil {
			return 0
		}
	}
	prevBusy, prevTotal := c.busy, c.total
	c.busy, c.total = busy, total
	if total <= prevTotal || busy < prevBusy {
		return 0
	}
	return float64(busy-prevBusy) / float64(total-prevTotal) * 100
}

func readCPU() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, errors.New("/proc/stat: unexpected format")
	}
	var idle uint64
	for i, f := range fields[1:] {
		n, _ := strconv.ParseUint(f, 10, 64)
		total += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return total - idle, total, nil
}
