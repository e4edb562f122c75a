// Command image packs a static binary into an OCI image tarball with nothing else in it: no base
// image to pull, no container daemon, only Go modules (go-containerregistry). `make image` builds
// the controller with CGO_ENABLED=0 and runs this on it:
//
//	go run . -binary ../../bin/image/profile-plugins-controller -out ../../bin/profile-plugins-controller.tar \
//	  -ref ghcr.io/kubeflow-ambient/profile-plugins-controller:v0.1.0 -version v0.1.0
//
// The tarball is an OCI image layout (index.json, oci-layout, blobs/): `skopeo copy
// oci-archive:bin/profile-plugins-controller.tar docker://REGISTRY/...`, `podman load -i`,
// `docker load -i` (Docker 25+), `ctr image import` or `kind load image-archive` take it. It is a
// module of its own so that the library's go.mod does not gain go-containerregistry.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
)

func main() {
	var o Options
	flag.StringVar(&o.Binary, "binary", "", "the static binary to run (required)")
	flag.StringVar(&o.Out, "out", "", "the OCI image tarball to write (required)")
	flag.StringVar(&o.Ref, "ref", "", "the image's name and tag, recorded as org.opencontainers.image.ref.name (required)")
	flag.StringVar(&o.Version, "version", "", "org.opencontainers.image.version")
	flag.StringVar(&o.OS, "os", "linux", "the platform's OS")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "the platform's architecture")
	flag.Parse()
	if err := Write(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}
