package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Import unpacks an image tarball: the output of `docker save` (one
// image; its manifest.json is read) or an OCI image layout packed as a tar
// (its linux/amd64 image, or its only image). The tar is spooled to a
// temporary file first, since both formats need random access.
func (s *Store) Import(ctx context.Context, r io.Reader, progress Progress) (Image, error) {
	f, err := os.CreateTemp(filepath.Join(s.cfg.Root, "tmp"), "import-*.tar")
	if err != nil {
		return Image{}, fmt.Errorf("image import: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := io.Copy(f, io.LimitReader(r, s.cfg.MaxBytes+1))
	if err != nil {
		return Image{}, fmt.Errorf("image import: %w", err)
	}
	if n > s.cfg.MaxBytes {
		return Image{}, errorf(ErrTooLarge, "the tarball is larger than the host's limit")
	}
	names, err := tarNames(f.Name())
	if err != nil {
		return Image{}, err
	}
	var img v1.Image
	switch {
	case names["manifest.json"]:
		img, err = tarball.Image(func() (io.ReadCloser, error) { return os.Open(f.Name()) }, nil)
		if err != nil {
			return Image{}, errorf(ErrInvalid, "docker save tarball: %v", err)
		}
	case names["index.json"] && names["oci-layout"]:
		dir, err := os.MkdirTemp(filepath.Join(s.cfg.Root, "tmp"), "layout-")
		if err != nil {
			return Image{}, fmt.Errorf("image import: %w", err)
		}
		defer removeAll(dir)
		if err := unpackLayout(f.Name(), dir, s.cfg.MaxBytes); err != nil {
			return Image{}, err
		}
		ii, err := layout.ImageIndexFromPath(dir)
		if err != nil {
			return Image{}, errorf(ErrInvalid, "OCI layout: %v", err)
		}
		if img, err = pickImage(ii, 0); err != nil {
			return Image{}, err
		}
	default:
		return Image{}, errorf(ErrInvalid, "the tarball is neither `docker save` output (manifest.json) nor an OCI layout (index.json, oci-layout)")
	}
	out, err := s.unpackImage(ctx, img, progress)
	if err != nil {
		return Image{}, classify("tarball", err)
	}
	progress.send(Event{Message: "imported image " + out.Digest})
	return out, nil
}

// tarNames lists the regular files at the top of a tar (all it takes to
// tell the two formats apart).
func tarNames(p string) (map[string]bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, errorf(ErrInvalid, "image tarball: %v", err)
		}
		out[path.Clean(hdr.Name)] = true
	}
}

// layoutFile is what an OCI layout may hold; nothing else is unpacked.
var layoutFile = regexp.MustCompile(`^(index\.json|oci-layout|blobs/sha256/[0-9a-f]{64})$`)

// unpackLayout writes an OCI layout's files (only those) from the tar at
// p into dir.
func unpackLayout(p, dir string, max int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700); err != nil {
		return err
	}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errorf(ErrInvalid, "OCI layout tar: %v", err)
		}
		name := path.Clean(hdr.Name)
		if hdr.Typeflag != tar.TypeReg || !layoutFile.MatchString(name) {
			continue
		}
		if hdr.Size > max {
			return errorf(ErrTooLarge, "%s is larger than the host's limit", name)
		}
		out, err := os.OpenFile(filepath.Join(dir, filepath.FromSlash(name)), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, io.LimitReader(tr, hdr.Size))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

// pickImage finds in an index the linux/amd64 image, or the only image
// when none says its platform.
func pickImage(ii v1.ImageIndex, depth int) (v1.Image, error) {
	if depth > 4 {
		return nil, errorf(ErrInvalid, "OCI layout: indexes nested too deep")
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, errorf(ErrInvalid, "OCI layout: %v", err)
	}
	var candidates []v1.Descriptor
	for _, d := range im.Manifests {
		switch {
		case d.MediaType.IsIndex():
			child, err := ii.ImageIndex(d.Digest)
			if err != nil {
				return nil, errorf(ErrInvalid, "OCI layout: %v", err)
			}
			if img, err := pickImage(child, depth+1); err == nil {
				return img, nil
			}
		case d.MediaType.IsImage():
			if d.Platform != nil && d.Platform.OS == Platform.OS && d.Platform.Architecture == Platform.Architecture {
				return ii.Image(d.Digest)
			}
			if d.Platform == nil || d.Platform.OS == "" {
				candidates = append(candidates, d)
			}
		}
	}
	if len(candidates) == 1 {
		return ii.Image(candidates[0].Digest)
	}
	return nil, errorf(ErrInvalid, "OCI layout: no %s/%s image (or more than one without a platform)", Platform.OS, Platform.Architecture)
}
