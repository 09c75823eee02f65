// Package image brings container images onto a host as template root
// filesystems. It pulls OCI and Docker images from registries
// (go-containerregistry: manifest lists resolved to linux/amd64,
// anonymous, basic and token auth, every blob checked against its digest,
// retries), imports `docker save` and OCI-layout tarballs, and keeps every
// layer unpacked once, named by its content digest, in a layer store that
// every template version shares.
//
// A layer is stored in the overlay format: a whiteout is a 0/0 character
// device and an opaque directory carries trusted.overlay.opaque, the form
// an overlay upper directory has, so the diff a Dockerfile build leaves on
// its build sandbox's disk is imported by the same code (ImportDir). A
// template version's root filesystem is a tree of hard links to the files
// of its layers (Flatten): it costs inodes, not a copy of the data, and
// layers are never written after they are stored.
//
// Unpacking never follows a symlink: every path is resolved with
// openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) below the layer's root, and
// an entry that would be written through a symlink, or names "..", is
// refused (ErrUnsafe). docs/templates.md describes what users see.
package image

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Errors a caller can tell apart with errors.Is. Each also wraps the
// sandbox category a transport maps to a status.
var (
	// ErrNotFound: the registry has no such repository, tag or digest.
	ErrNotFound = errors.New("image not found")
	// ErrUnauthorized: the registry refused the credentials (or their
	// absence).
	ErrUnauthorized = errors.New("image pull unauthorized")
	// ErrDigest: a blob's bytes do not match the digest that names it.
	ErrDigest = errors.New("image digest mismatch")
	// ErrInvalid: a malformed reference, manifest or tarball, or an image
	// without a linux/amd64 variant.
	ErrInvalid = errors.New("invalid image")
	// ErrUnsafe: a layer entry would escape the root filesystem (a ".."
	// element, or a path through a symlink).
	ErrUnsafe = errors.New("unsafe image layer")
	// ErrTooLarge: the image unpacks to more than Config.MaxBytes.
	ErrTooLarge = errors.New("image too large")
	// ErrRegistry: the registry could not be reached or kept failing.
	ErrRegistry = errors.New("registry unavailable")
)

// categories maps each error to the sandbox category it carries.
var categories = map[error]error{
	ErrNotFound:     sandbox.ErrNotFound,
	ErrUnauthorized: sandbox.ErrForbidden,
	ErrDigest:       sandbox.ErrInvalidArgument,
	ErrInvalid:      sandbox.ErrInvalidArgument,
	ErrUnsafe:       sandbox.ErrInvalidArgument,
	ErrTooLarge:     sandbox.ErrInvalidArgument,
	ErrRegistry:     sandbox.ErrUnavailable,
}

// errorf wraps kind (one of the Err* values) and its category.
func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %w", &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}, categories[kind])
}

type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.kind.Error() + ": " + e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// Config configures a Store.
type Config struct {
	// Root holds the layers (Root/sha256/<hex>) and temporary files
	// (Root/tmp). It must be on the same filesystem as the directories
	// Flatten writes, so that versions can hard-link layer files.
	Root string
	// AllowPrivate lets pulls reach registries on loopback, private and
	// link-local addresses. Off, such a registry is refused before any
	// byte is sent: a reference is user input, and ptd must not become a
	// way to probe the networks it sits on.
	AllowPrivate bool
	// MaxBytes caps the unpacked size of one image or diff (0: 32 GiB), so
	// that a small compressed layer cannot fill the host's disk.
	MaxBytes int64
}

// DefaultMaxBytes is Config.MaxBytes's default.
const DefaultMaxBytes = 32 << 30

// Store is the layer store of one host.
type Store struct {
	cfg Config
	log *slog.Logger
	// mu serialises work on one layer digest (two pulls sharing a layer
	// unpack it once).
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// Open prepares the store's directories and removes temporary files a
// crash left behind.
func Open(cfg Config, logger *slog.Logger) (*Store, error) {
	if cfg.Root == "" || !filepath.IsAbs(cfg.Root) {
		return nil, fmt.Errorf("image store: root %q must be an absolute path: %w", cfg.Root, sandbox.ErrInvalidArgument)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tmp := filepath.Join(cfg.Root, "tmp")
	removeAll(tmp)
	for _, d := range []string{filepath.Join(cfg.Root, "sha256"), tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	return &Store{cfg: cfg, log: logger, locks: map[string]*sync.Mutex{}}, nil
}

// lock serialises work on one digest.
func (s *Store) lock(digest string) func() {
	s.mu.Lock()
	m, ok := s.locks[digest]
	if !ok {
		m = &sync.Mutex{}
		s.locks[digest] = m
	}
	s.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// layerDir is where the layer with that diff ID ("sha256:<hex>") lives.
func (s *Store) layerDir(diffID string) (string, error) {
	hex, ok := strings.CutPrefix(diffID, "sha256:")
	if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", errorf(ErrInvalid, "layer digest %q is not sha256:<64 hex>", diffID)
	}
	return filepath.Join(s.cfg.Root, "sha256", hex), nil
}

// Has reports whether the layer is stored.
func (s *Store) Has(diffID string) bool {
	dir, err := s.layerDir(diffID)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "fs"))
	return err == nil
}

// Layers lists the stored layers' diff IDs.
func (s *Store) Layers() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.cfg.Root, "sha256"))
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, "sha256:"+e.Name())
	}
	return out, nil
}

// Remove deletes a stored layer. Versions already flattened keep their
// files (hard links); only new versions can no longer use it. Idempotent.
func (s *Store) Remove(diffID string) error {
	dir, err := s.layerDir(diffID)
	if err != nil {
		return err
	}
	defer s.lock(diffID)()
	// Rename first, so that a crash never leaves a half-removed layer
	// under its name.
	tmp, err := os.MkdirTemp(filepath.Join(s.cfg.Root, "tmp"), "rm-")
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	if err := os.Rename(dir, filepath.Join(tmp, "layer")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("image store: remove %s: %w", diffID, err)
	}
	removeAll(tmp)
	return nil
}

// Event is one progress report of a pull, an import or an unpack.
type Event struct {
	// Layer is the diff ID (or, before it is known, the blob digest) the
	// event is about; empty for image-level events.
	Layer string
	// Bytes is how many (compressed) bytes of the layer were read so far,
	// out of Total (0 when unknown).
	Bytes, Total int64
	// Cached is true when the layer was stored already and nothing was
	// fetched.
	Cached bool
	// Done is true on a layer's last event.
	Done bool
	// Message is a human line ("resolved docker.io/library/x:1 to
	// sha256:…").
	Message string
}

// Progress receives events; nil discards them. It is called from the
// goroutine doing the work and must not block for long.
type Progress func(Event)

func (p Progress) send(e Event) {
	if p != nil {
		p(e)
	}
}

// Settings is what an image's configuration says about running it.
type Settings struct {
	Env        []string          `json:"env,omitempty"`
	User       string            `json:"user,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	// ExposedPorts are "8080/tcp"-style keys, sorted.
	ExposedPorts []string `json:"exposed_ports,omitempty"`
}

// Image is an image whose layers are all in the store.
type Image struct {
	// Digest is the manifest's digest (of the linux/amd64 manifest when
	// the reference named a list).
	Digest string
	// Layers are the diff IDs, base first.
	Layers   []string
	Settings Settings
	// Size is the sum of the layers' compressed sizes.
	Size int64
}

// Auth is one registry's credentials: a username and password (basic, or
// exchanged for a bearer token when the registry asks), or a registry
// token. Its String and LogValue never show the secret.
type Auth struct {
	Username, Password, Token string
}

// String implements fmt.Stringer without the secret.
func (a Auth) String() string {
	switch {
	case a.Token != "":
		return "token:[redacted]"
	case a.Username != "":
		return a.Username + ":[redacted]"
	}
	return "anonymous"
}

// LogValue implements slog.LogValuer without the secret.
func (a Auth) LogValue() slog.Value { return slog.StringValue(a.String()) }

// GoString keeps %#v from printing the secret.
func (a Auth) GoString() string { return a.String() }

// Anonymous reports whether a holds no credentials.
func (a Auth) Anonymous() bool { return a.Username == "" && a.Token == "" }

// budget counts unpacked bytes against Config.MaxBytes.
type budget struct{ left int64 }

func (b *budget) take(n int64) error {
	b.left -= n
	if b.left < 0 {
		return errorf(ErrTooLarge, "the image unpacks to more than the host's limit")
	}
	return nil
}
