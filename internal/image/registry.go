package image

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/klauspost/compress/zstd"
)

// Platform is the only platform a host runs.
var Platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// Registry returns the registry host of a reference ("docker.io" for
// "busybox"), the key credentials are stored under.
func Registry(ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", errorf(ErrInvalid, "reference %q: %v", ref, err)
	}
	return r.Context().RegistryStr(), nil
}

// remoteOptions are the options of every registry call: the caller's
// credentials, linux/amd64, retries with backoff on transient statuses,
// and a transport that refuses private addresses unless allowed.
func (s *Store) remoteOptions(ctx context.Context, auth Auth) []remote.Option {
	var a authn.Authenticator = authn.Anonymous
	switch {
	case auth.Token != "":
		a = authn.FromConfig(authn.AuthConfig{RegistryToken: auth.Token})
	case auth.Username != "":
		a = authn.FromConfig(authn.AuthConfig{Username: auth.Username, Password: auth.Password})
	}
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuth(a),
		remote.WithPlatform(Platform),
		remote.WithTransport(s.transport()),
		remote.WithRetryBackoff(remote.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 4}),
		remote.WithRetryStatusCodes(http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
			http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout),
		remote.WithUserAgent("platinum"),
	}
}

// transport dials registries, refusing loopback, private, link-local and
// unspecified addresses unless Config.AllowPrivate: the check runs on the
// address actually dialled, after DNS, so a name cannot smuggle one in.
func (s *Store) transport() http.RoundTripper {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !s.cfg.AllowPrivate {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			a := ap.Addr().Unmap()
			if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsUnspecified() || a.IsMulticast() ||
				netip.MustParsePrefix("100.64.0.0/10").Contains(a) {
				return fmt.Errorf("registry address %s is private (ptd --image-registry-allow-private allows it)", a)
			}
			return nil
		}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = d.DialContext
	t.ResponseHeaderTimeout = time.Minute
	return t
}

// classify turns a registry failure into one of the package's errors.
func classify(ref string, err error) error {
	if err == nil {
		return nil
	}
	var ke *kindError
	if errors.As(err, &ke) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var te *transport.Error
	if errors.As(err, &te) {
		for _, d := range te.Errors {
			switch d.Code {
			case transport.NameUnknownErrorCode, transport.ManifestUnknownErrorCode, transport.BlobUnknownErrorCode:
				return errorf(ErrNotFound, "%s: the registry has no such image (%s)", ref, d.Code)
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return errorf(ErrUnauthorized, "%s: the registry refused the pull (%s); store credentials for it", ref, d.Code)
			}
		}
		switch te.StatusCode {
		case http.StatusNotFound:
			return errorf(ErrNotFound, "%s: the registry has no such image", ref)
		case http.StatusUnauthorized, http.StatusForbidden:
			return errorf(ErrUnauthorized, "%s: the registry refused the pull (HTTP %d); store credentials for it", ref, te.StatusCode)
		}
		return errorf(ErrRegistry, "%s: HTTP %d from the registry", ref, te.StatusCode)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "error verifying"):
		return errorf(ErrDigest, "%s: %v", ref, err)
	case strings.Contains(msg, "no child with platform"), strings.Contains(msg, "unsupported MediaType"):
		return errorf(ErrInvalid, "%s: %v", ref, err)
	}
	return errorf(ErrRegistry, "%s: %v", ref, err)
}

// remoteImage is ref's linux/amd64 image in its registry (the image
// itself, or the entry of the list ref names), read as far as its
// manifest; errors come classified.
func (s *Store) remoteImage(ctx context.Context, ref string, auth Auth) (v1.Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, errorf(ErrInvalid, "reference %q: %v", ref, err)
	}
	desc, err := remote.Get(r, s.remoteOptions(ctx, auth)...)
	if err != nil {
		return nil, classify(ref, err)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, classify(ref, err)
	}
	return img, nil
}

// Resolve checks that ref exists and that the credentials may pull it,
// and returns its linux/amd64 image as its manifest and config describe
// it, layers not fetched. It reads manifests and the config only: a create
// can answer 404 or 403 at once, before any layer moves.
func (s *Store) Resolve(ctx context.Context, ref string, auth Auth) (Image, error) {
	img, err := s.remoteImage(ctx, ref, auth)
	if err != nil {
		return Image{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return Image{}, classify(ref, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return Image{}, classify(ref, err)
	}
	out := Image{Digest: d.String(), Settings: settingsOf(cfg)}
	for _, id := range cfg.RootFS.DiffIDs {
		out.Layers = append(out.Layers, id.String())
	}
	return out, nil
}

// Pull fetches ref (its linux/amd64 image when it names a list) and
// unpacks every layer not stored yet. Layers already stored are neither
// fetched nor unpacked again.
func (s *Store) Pull(ctx context.Context, ref string, auth Auth, progress Progress) (Image, error) {
	img, err := s.remoteImage(ctx, ref, auth)
	if err != nil {
		return Image{}, err
	}
	out, err := s.unpackImage(ctx, img, progress)
	if err != nil {
		return Image{}, classify(ref, err)
	}
	progress.send(Event{Message: fmt.Sprintf("pulled %s (%s)", ref, out.Digest)})
	return out, nil
}

// unpackImage stores every layer of img and returns what the image is.
func (s *Store) unpackImage(ctx context.Context, img v1.Image, progress Progress) (Image, error) {
	digest, err := img.Digest()
	if err != nil {
		return Image{}, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return Image{}, err
	}
	if cfg.OS != "" && (cfg.OS != Platform.OS || (cfg.Architecture != "" && cfg.Architecture != Platform.Architecture)) {
		return Image{}, errorf(ErrInvalid, "the image is %s/%s; hosts run %s/%s", cfg.OS, cfg.Architecture, Platform.OS, Platform.Architecture)
	}
	layers, err := img.Layers()
	if err != nil {
		return Image{}, err
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		return Image{}, errorf(ErrInvalid, "the manifest has %d layers, the config %d", len(layers), len(cfg.RootFS.DiffIDs))
	}
	out := Image{Digest: digest.String(), Settings: settingsOf(cfg)}
	b := &budget{left: s.cfg.MaxBytes}
	for i, l := range layers {
		diffID := cfg.RootFS.DiffIDs[i].String()
		out.Layers = append(out.Layers, diffID)
		size, _ := l.Size()
		out.Size += size
		if err := s.fetchLayer(ctx, l, diffID, size, b, progress); err != nil {
			return Image{}, err
		}
	}
	return out, nil
}

// fetchLayer stores one layer unless it is there already. A transfer that
// breaks off is tried again (up to three times) from the start: the
// registry client retries requests, not bodies.
func (s *Store) fetchLayer(ctx context.Context, l v1.Layer, diffID string, size int64, b *budget, progress Progress) error {
	defer s.lock(diffID)()
	if s.Has(diffID) {
		progress.send(Event{Layer: diffID, Total: size, Bytes: size, Cached: true, Done: true, Message: "already stored"})
		return nil
	}
	want, err := l.Digest()
	if err != nil {
		return err
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			progress.send(Event{Layer: diffID, Total: size, Message: fmt.Sprintf("retrying after: %v", last)})
		}
		last = s.fetchLayerOnce(ctx, l, diffID, want.String(), size, b, progress)
		var ke *kindError
		if last == nil || errors.As(last, &ke) || ctx.Err() != nil {
			return last
		}
	}
	return last
}

func (s *Store) fetchLayerOnce(ctx context.Context, l v1.Layer, diffID, want string, size int64, b *budget, progress Progress) error {
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	cr := &countingReader{r: rc, h: sha256.New(), total: size, layer: diffID, progress: progress, every: 1 << 20}
	un, err := decompress(cr)
	if err != nil {
		return err
	}
	defer un.Close()
	check := func() error {
		// What the decompressor left (a trailer, padding) is part of the blob.
		if _, err := io.Copy(io.Discard, cr); err != nil {
			return err
		}
		if got := "sha256:" + hex.EncodeToString(cr.h.Sum(nil)); got != want {
			return errorf(ErrDigest, "layer blob %s hashes to %s", want, got)
		}
		return nil
	}
	if _, err := s.storeLayer(ctx, un, diffID, b, check); err != nil {
		var ke *kindError
		if errors.As(err, &ke) && ke.kind != ErrDigest && ctx.Err() == nil {
			// A tar or decompression error is most often damaged bytes:
			// say so when the blob does not match its digest.
			if derr := check(); derr != nil {
				return derr
			}
		}
		return err
	}
	progress.send(Event{Layer: diffID, Bytes: cr.n, Total: size, Done: true})
	return nil
}

// countingReader hashes and counts what passes, reporting progress about
// every `every` bytes.
type countingReader struct {
	r        io.Reader
	h        hash.Hash
	n, total int64
	last     int64
	every    int64
	layer    string
	progress Progress
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.h.Write(p[:n])
		c.n += int64(n)
		if c.n-c.last >= c.every {
			c.last = c.n
			c.progress.send(Event{Layer: c.layer, Bytes: c.n, Total: c.total})
		}
	}
	return n, err
}

// decompress sniffs gzip and zstd (the compressions OCI allows) and
// passes anything else through as an uncompressed tar.
func decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, errorf(ErrInvalid, "layer: %v", err)
		}
		return zr, nil
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		zr, err := zstd.NewReader(br)
		if err != nil {
			return nil, errorf(ErrInvalid, "layer: %v", err)
		}
		return zr.IOReadCloser(), nil
	}
	return io.NopCloser(br), nil
}

// settingsOf reads what an image's config says about running it.
func settingsOf(cfg *v1.ConfigFile) Settings {
	c := cfg.Config
	st := Settings{Env: c.Env, User: c.User, WorkingDir: c.WorkingDir, Entrypoint: c.Entrypoint, Cmd: c.Cmd, Labels: c.Labels}
	for p := range c.ExposedPorts {
		st.ExposedPorts = append(st.ExposedPorts, p)
	}
	sort.Strings(st.ExposedPorts)
	return st
}
