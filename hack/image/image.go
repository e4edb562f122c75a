package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// EntrypointPath is where the binary lives in the image, and the image's entrypoint.
	EntrypointPath = "/profile-plugins-controller"
	// User is the numeric user and group the image runs as: not root, and numeric so that the
	// kubelet can check runAsNonRoot without an /etc/passwd (the image has none). 65532 is the
	// "nonroot" user of distroless images, which admins already allow.
	User = "65532:65532"
)

// epoch is every timestamp in the image, so that the same binary gives the same image digest.
var epoch = time.Unix(0, 0).UTC()

// Options says what to pack and where.
type Options struct {
	Binary, Out, Ref, Version, OS, Arch string
}

func (o Options) validate() error {
	var errs []error
	for _, f := range []struct{ name, value string }{{"-binary", o.Binary}, {"-out", o.Out}, {"-ref", o.Ref}, {"-os", o.OS}, {"-arch", o.Arch}} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("%s: required", f.name))
		}
	}
	return errors.Join(errs...)
}

// Write packs o.Binary into an image and writes it to o.Out as an OCI layout tarball.
func Write(o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	img, err := Image(o)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "image-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Ref,
	})); err != nil {
		return err
	}
	return tarDir(dir, o.Out)
}

// Image is the binary as the only file of a one-layer image on the empty base, run as User.
func Image(o Options) (v1.Image, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("-binary: %w", err)
	}
	layer, err := binaryLayer(bin)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = o.OS, o.Arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config.User = User
	cf.Config.Entrypoint = []string{EntrypointPath}
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":  "profile-plugins-controller",
		"org.opencontainers.image.source": "https://github.com/kubeflow-ambient/profile-plugins",
	}
	if o.Version != "" {
		cf.Config.Labels["org.opencontainers.image.version"] = o.Version
	}
	return mutate.ConfigFile(img, cf)
}

// binaryLayer is a gzipped tar holding bin at EntrypointPath, root-owned and not writable (the
// process runs as User, so it cannot change its own binary even without a read-only root).
func binaryLayer(bin []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: EntrypointPath[1:], Mode: 0o555, Size: int64(len(bin)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// tarDir writes the files under dir into the tar file out, with paths relative to dir (the
// layout of an OCI archive).
func tarDir(dir, out string) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = filepath.ToSlash(rel), epoch, 0, 0, "", ""
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
