package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// imageTarball is the image the test reads: IMAGE_TARBALL when set (`make image` checks the
// controller's image it just wrote), else one this test packs from a small static stand-in built
// as `make image` builds the controller (CGO_ENABLED=0).
func imageTarball(t *testing.T) (path string, binary []byte) {
	t.Helper()
	if p := os.Getenv("IMAGE_TARBALL"); p != "" {
		t.Logf("reading %s (IMAGE_TARBALL)", p)
		return p, nil
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "profile-plugins-controller")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/static")
	// GOFLAGS may carry another module's -modfile (make test-newest): this build is this module's own.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "image.tar")
	if err := Write(Options{Binary: bin, Out: out, Ref: "example.com/profile-plugins-controller:test", Version: "v0.0.0-test", OS: "linux", Arch: runtime.GOARCH}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return out, data
}

// untar reads every regular file of a tar stream into a map by name.
func untar(t *testing.T, r io.Reader) map[string]*fileEntry {
	t.Helper()
	files := map[string]*fileEntry{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = &fileEntry{hdr: hdr, data: data}
	}
}

type fileEntry struct {
	hdr  *tar.Header
	data []byte
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
}

// blob decodes the JSON blob d points to.
func blob(t *testing.T, files map[string]*fileEntry, d descriptor, into any) []byte {
	t.Helper()
	algo, hex, ok := strings.Cut(d.Digest, ":")
	if !ok {
		t.Fatalf("digest %q", d.Digest)
	}
	f := files["blobs/"+algo+"/"+hex]
	if f == nil {
		t.Fatalf("blob %s missing from the archive", d.Digest)
	}
	if into != nil {
		if err := json.Unmarshal(f.data, into); err != nil {
			t.Fatalf("%s: %v", d.Digest, err)
		}
	}
	return f.data
}

// The tarball, unpacked with nothing but the standard library, is an OCI layout whose one image
// runs the controller binary as a numeric non-root user, and holds that static binary alone.
func TestImageRunsTheControllerAsNonRoot(t *testing.T) {
	path, binary := imageTarball(t)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := untar(t, f)
	if files["oci-layout"] == nil || files["index.json"] == nil {
		t.Fatalf("not an OCI layout: %d files", len(files))
	}
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(files["index.json"].data, &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(index.Manifests))
	}
	if ref := index.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref == "" {
		t.Error("the image has no org.opencontainers.image.ref.name")
	}
	var manifest struct {
		MediaType string
		Config    descriptor
		Layers    []descriptor
	}
	blob(t, files, index.Manifests[0], &manifest)
	if manifest.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %q", manifest.MediaType)
	}
	var cfg struct {
		OS, Architecture string
		Config           struct {
			User       string
			Entrypoint []string
			Cmd        []string
		}
	}
	blob(t, files, manifest.Config, &cfg)
	if cfg.Config.User != User || strings.HasPrefix(cfg.Config.User, "0:") || cfg.Config.User == "0" {
		t.Errorf("user %q, want %q", cfg.Config.User, User)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != EntrypointPath || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [%s] and no cmd", cfg.Config.Entrypoint, cfg.Config.Cmd, EntrypointPath)
	}
	if cfg.OS != "linux" || cfg.Architecture == "" {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	if len(manifest.Layers) != 1 {
		t.Fatalf("%d layers, want the binary's alone on an empty base", len(manifest.Layers))
	}
	gz, err := gzip.NewReader(bytes.NewReader(blob(t, files, manifest.Layers[0], nil)))
	if err != nil {
		t.Fatal(err)
	}
	layer := untar(t, gz)
	entry := layer[strings.TrimPrefix(EntrypointPath, "/")]
	if len(layer) != 1 || entry == nil {
		t.Fatalf("layer files %v, want only %s", keys(layer), EntrypointPath)
	}
	if entry.hdr.Mode&0o222 != 0 || entry.hdr.Mode&0o111 == 0 {
		t.Errorf("binary mode %o: want executable and not writable", entry.hdr.Mode)
	}
	if binary != nil && !bytes.Equal(entry.data, binary) {
		t.Error("the layer's binary is not the one built")
	}
	exe, err := elf.NewFile(bytes.NewReader(entry.data))
	if err != nil {
		t.Fatalf("the entrypoint is not an ELF binary: %v", err)
	}
	for _, p := range exe.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked, but the image has no libc")
		}
	}
}

func keys(m map[string]*fileEntry) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Bad options name the flag.
func TestWriteNamesMissingFlags(t *testing.T) {
	err := Write(Options{OS: "linux", Arch: "amd64"})
	if err == nil {
		t.Fatal("no error")
	}
	for _, f := range []string{"-binary", "-out", "-ref"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%v does not name %s", err, f)
		}
	}
}
