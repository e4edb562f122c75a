// Package buildinfo is the version both programs report: `profile-plugins version` and the
// reference controller's start log (and its -version flag).
//
// A release build sets it with the linker, the same flag for both programs (`make image` and
// `make release-binaries` pass it from VERSION):
//
//	go build -ldflags "-X github.com/kubeflow-ambient/profile-plugins/internal/buildinfo.Version=v0.1.0" ./cmd/...
//
// Without that it is the main module's version as the go command recorded it (a tag for
// `go install ...@v0.1.0`, a pseudo-version from a VCS checkout), or "(devel)" when unknown.
package buildinfo
