// Package version is `profile-plugins version`: the module version the binary was built from, as
// package internal/buildinfo reports it for both programs. A release build sets it with the linker,
//
//	go build -ldflags "-X github.com/kubeflow-ambient/profile-plugins/internal/buildinfo.Version=v0.1.0" ./cmd/profile-plugins
//
// and without that it is the main module's version as the go command recorded it (a tag for
// `go install ...@v0.1.0`, a pseudo-version from a VCS checkout), or "(devel)" when unknown.
package version
