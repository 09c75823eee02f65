package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// fileInfo is the daemon's FileInfo.
type fileInfo struct {
	Name        string `json:"name"`
	Path        string `json:"path"`
	IsDir       bool   `json:"isDir"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
	Permissions string `json:"permissions"`
	Owner       string `json:"owner"`
	Group       string `json:"group"`
	ModTime     string `json:"modTime"`
	ModifiedAt  string `json:"modifiedAt"`
}

func toFileInfo(path string, fi fs.FileInfo) fileInfo {
	out := fileInfo{Name: fi.Name(), Path: path, IsDir: fi.IsDir(), Size: fi.Size(), Mode: fi.Mode().String(),
		Permissions: fmt.Sprintf("%#o", fi.Mode().Perm()), ModTime: fi.ModTime().String(),
		ModifiedAt: fi.ModTime().UTC().Format(time.RFC3339Nano)}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		out.Owner, out.Group = userName(st.Uid), groupName(st.Gid)
	}
	return out
}

// path resolves a query or body path like the rest of the agent: relative
// to the default user's home, never through "..".
func (tb *toolbox) path(p string) (string, *account, error) {
	acct, err := tb.s.lookupAccount("")
	if err != nil {
		return "", nil, err
	}
	if p == "" {
		return "", nil, tbErr(http.StatusBadRequest, "INVALID_FILE_PATH", "path is required")
	}
	abs, err := resolvePath(p, acct.home)
	return abs, acct, err
}

func (tb *toolbox) listFiles(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query().Get("path")
	if q == "" {
		q = "."
	}
	dir, _, err := tb.path(q)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	out := make([]fileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, toFileInfo(filepath.Join(dir, e.Name()), fi))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (tb *toolbox) fileInfo(w http.ResponseWriter, r *http.Request) error {
	p, _, err := tb.path(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toFileInfo(p, fi))
	return nil
}

func parseMode(s string, def fs.FileMode) (fs.FileMode, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, tbErr(http.StatusBadRequest, "BAD_REQUEST", "mode %q is not an octal permission (e.g. 755)", s)
	}
	return fs.FileMode(n).Perm() | fs.FileMode(n)&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky), nil
}

func (tb *toolbox) createFolder(w http.ResponseWriter, r *http.Request) error {
	p, acct, err := tb.path(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	mode, err := parseMode(r.URL.Query().Get("mode"), 0o755)
	if err != nil {
		return err
	}
	if err := mkdirAll(p, acct); err != nil {
		return err
	}
	if err := os.Chmod(p, mode); err != nil {
		return err
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}

func (tb *toolbox) deleteFile(w http.ResponseWriter, r *http.Request) error {
	p, _, err := tb.path(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		if r.URL.Query().Get("recursive") != "true" {
			if err := os.Remove(p); err != nil {
				return tbErr(http.StatusBadRequest, "BAD_REQUEST", "%s is a directory: delete it with recursive=true (%v)", p, err)
			}
		} else if err := os.RemoveAll(p); err != nil {
			return err
		}
	} else if err := os.Remove(p); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (tb *toolbox) moveFile(w http.ResponseWriter, r *http.Request) error {
	src, acct, err := tb.path(r.URL.Query().Get("source"))
	if err != nil {
		return err
	}
	dst, _, err := tb.path(r.URL.Query().Get("destination"))
	if err != nil {
		return err
	}
	if _, err := os.Lstat(src); err != nil {
		return err
	}
	if err := mkdirAll(filepath.Dir(dst), acct); err != nil {
		return err
	}
	if err := os.Rename(src, dst); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// walkFiles calls fn for every regular file under root (root itself when
// it is a file), skipping what cannot be read.
func walkFiles(root string, fn func(path string, d fs.DirEntry) error) error {
	if _, err := os.Stat(root); err != nil {
		return err
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil
		}
		return fn(p, d)
	})
}

// findInFiles is GET /files/find: lines containing pattern (a plain
// substring, as the daemon's grep -F) in files under path.
func (tb *toolbox) findInFiles(w http.ResponseWriter, r *http.Request) error {
	root, _, err := tb.path(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	pattern := r.URL.Query().Get("pattern")
	if pattern == "" {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "pattern is required")
	}
	type match struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Content string `json:"content"`
	}
	out := []match{}
	err = walkFiles(root, func(p string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Bytes()
			if bytes.IndexByte(line, 0) >= 0 {
				return nil // binary
			}
			if bytes.Contains(line, []byte(pattern)) {
				out = append(out, match{File: p, Line: n, Content: string(line)})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// searchFiles is GET /files/search: paths under path whose base name
// matches the glob pattern.
func (tb *toolbox) searchFiles(w http.ResponseWriter, r *http.Request) error {
	root, _, err := tb.path(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	pattern := r.URL.Query().Get("pattern")
	if _, err := filepath.Match(pattern, ""); err != nil || pattern == "" {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "pattern must be a glob such as *.txt")
	}
	files := []string{}
	err = walkFiles(root, func(p string, d fs.DirEntry) error {
		if ok, _ := filepath.Match(pattern, d.Name()); ok && p != root {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": files})
	return nil
}

// replaceInFiles is POST /files/replace: every occurrence of pattern (a
// plain string) becomes newValue in each listed file; one result per file.
func (tb *toolbox) replaceInFiles(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Files    []string `json:"files"`
		Pattern  string   `json:"pattern"`
		NewValue *string  `json:"newValue"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Pattern == "" || req.NewValue == nil {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "pattern and newValue are required")
	}
	type result struct {
		File    string `json:"file"`
		Success bool   `json:"success"`
		Error   string `json:"error,omitempty"`
	}
	out := make([]result, 0, len(req.Files))
	for _, f := range req.Files {
		err := func() error {
			p, _, err := tb.path(f)
			if err != nil {
				return err
			}
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, bytes.ReplaceAll(b, []byte(req.Pattern), []byte(*req.NewValue)), fi.Mode().Perm())
		}()
		res := result{File: f, Success: err == nil}
		if err != nil {
			res.Error = err.Error()
		}
		out = append(out, res)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// setPermissions is POST /files/permissions: mode (octal), owner and group
// (names or numeric IDs), each optional.
func (tb *toolbox) setPermissions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p, _, err := tb.path(q.Get("path"))
	if err != nil {
		return err
	}
	if _, err := os.Lstat(p); err != nil {
		return err
	}
	if m := q.Get("mode"); m != "" {
		mode, err := parseMode(m, 0)
		if err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	uid, gid := -1, -1
	if o := q.Get("owner"); o != "" {
		if uid, err = lookupID(o, true); err != nil {
			return err
		}
	}
	if g := q.Get("group"); g != "" {
		if gid, err = lookupID(g, false); err != nil {
			return err
		}
	}
	if uid >= 0 || gid >= 0 {
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func lookupID(name string, isUser bool) (int, error) {
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		return n, nil
	}
	var id string
	if isUser {
		u, err := lookupPasswd(name, false)
		if err != nil {
			return 0, tbErr(http.StatusBadRequest, "BAD_REQUEST", "unknown user %q", name)
		}
		id = u.uid
	} else {
		g, err := lookupGroup(name, false)
		if err != nil {
			return 0, tbErr(http.StatusBadRequest, "BAD_REQUEST", "unknown group %q", name)
		}
		id = g.gid
	}
	return strconv.Atoi(id)
}

func (tb *toolbox) downloadFile(w http.ResponseWriter, r *http.Request) error {
	p, _, err := tb.path(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return tbErr(http.StatusBadRequest, "INVALID_FILE_PATH", "%s is a directory", p)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", fi.ModTime(), f)
	return nil
}

// bulkUpload is POST /files/bulk-upload: multipart parts files[i].path
// (the destination) then files[i].file (the bytes), streamed straight to
// disk; missing parent directories are made.
func (tb *toolbox) bulkUpload(w http.ResponseWriter, r *http.Request) error {
	mr, err := r.MultipartReader()
	if err != nil {
		return tbErr(http.StatusBadRequest, "INVALID_REQUEST_BODY", "a multipart/form-data body is required: %v", err)
	}
	paths := map[string]string{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return tbErr(http.StatusBadRequest, "INVALID_REQUEST_BODY", "multipart: %v", err)
		}
		name := part.FormName()
		idx, field, ok := uploadField(name)
		if !ok {
			part.Close()
			continue
		}
		if field == "path" {
			b, _ := io.ReadAll(io.LimitReader(part, 8<<10))
			paths[idx] = string(b)
			part.Close()
			continue
		}
		dest := paths[idx]
		if dest == "" {
			dest = part.FileName()
		}
		if err := tb.writeUpload(dest, part); err != nil {
			part.Close()
			return err
		}
		part.Close()
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// uploadV2 is POST /files/upload-v2?path=: one file, as a multipart
// field "file" or as the raw body (the 0.218 SDK's signed upload URLs;
// ptd checks their signature before the call gets here). Parents are
// made and an existing file is replaced; the answer is {name, path, type}.
func (tb *toolbox) uploadV2(w http.ResponseWriter, r *http.Request) error {
	dest := r.URL.Query().Get("path")
	p, _, err := tb.path(dest)
	if err != nil {
		return err
	}
	body := io.Reader(r.Body)
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		mr, err := r.MultipartReader()
		if err != nil {
			return tbErr(http.StatusBadRequest, "INVALID_REQUEST_BODY", "multipart: %v", err)
		}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				return tbErr(http.StatusBadRequest, "INVALID_REQUEST_BODY", "the multipart body has no \"file\" field")
			}
			if err != nil {
				return tbErr(http.StatusBadRequest, "INVALID_REQUEST_BODY", "multipart: %v", err)
			}
			if part.FormName() == "file" {
				defer part.Close()
				body = part
				break
			}
			part.Close()
		}
	}
	if err := tb.writeUpload(dest, body); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": filepath.Base(p), "path": p, "type": "file"})
	return nil
}

// uploadField splits "files[3].path" into ("3", "path").
func uploadField(name string) (idx, field string, ok bool) {
	rest, ok := strings.CutPrefix(name, "files[")
	if !ok {
		return "", "", false
	}
	idx, field, ok = strings.Cut(rest, "].")
	return idx, field, ok && (field == "path" || field == "file")
}

func (tb *toolbox) writeUpload(dest string, body io.Reader) error {
	p, acct, err := tb.path(dest)
	if err != nil {
		return err
	}
	if err := mkdirAll(filepath.Dir(p), acct); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".upload-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, body); err != nil {
		tmp.Close()
		return tbErr(http.StatusBadRequest, "INVALID_REQUEST_BODY", "upload %s: %v", dest, err)
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(p); err == nil {
		if fi.IsDir() {
			tmp.Close()
			return tbErr(http.StatusBadRequest, "INVALID_FILE_PATH", "%s is a directory", p)
		}
		mode = fi.Mode().Perm()
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	chown(tmp.Name(), acct)
	return os.Rename(tmp.Name(), p)
}

// bulkDownload is POST /files/bulk-download {paths}: one multipart part
// per path, in order, named file (the bytes) or error (the daemon's JSON
// error), each with the requested path as its filename.
func (tb *toolbox) bulkDownload(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Paths []string `json:"paths"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if len(req.Paths) == 0 {
		return tbErr(http.StatusBadRequest, "BAD_REQUEST", "paths must name at least one file")
	}
	mw := multipart.NewWriter(w)
	w.Header().Set("Content-Type", mw.FormDataContentType())
	w.WriteHeader(http.StatusOK)
	for _, want := range req.Paths {
		if err := tb.downloadPart(r, mw, want); err != nil {
			return nil // the client went away mid-stream; nothing to answer
		}
	}
	_ = mw.Close()
	return nil
}

func (tb *toolbox) downloadPart(r *http.Request, mw *multipart.Writer, want string) error {
	fail := func(err error) error {
		hdr := textproto.MIMEHeader{}
		hdr.Set("Content-Disposition", multipartDisposition("error", want))
		hdr.Set("Content-Type", "application/json")
		pw, perr := mw.CreatePart(hdr)
		if perr != nil {
			return perr
		}
		return json.NewEncoder(pw).Encode(newToolboxErrorBody(r, err))
	}
	p, _, err := tb.path(want)
	if err != nil {
		return fail(err)
	}
	f, err := os.Open(p)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if fi.IsDir() {
		return fail(tbErr(http.StatusBadRequest, "INVALID_FILE_PATH", "%s is a directory", p))
	}
	hdr := textproto.MIMEHeader{}
	hdr.Set("Content-Disposition", multipartDisposition("file", want))
	hdr.Set("Content-Type", "application/octet-stream")
	hdr.Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	pw, err := mw.CreatePart(hdr)
	if err != nil {
		return err
	}
	_, err = io.Copy(pw, f)
	return err
}

var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

func multipartDisposition(name, filename string) string {
	return fmt.Sprintf(`form-data; name="%s"; filename="%s"`, name, quoteEscaper.Replace(filename))
}
