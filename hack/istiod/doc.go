// Package istiod tests the reference controller with the real istiod: Istio 1.30.3's
// pilot-discovery, built from source, and the controller's binary, both against the project's test
// API server (internal/envtest), with pod readiness and garbage collection stood in (see package
// harness for exactly what). Run them with `make test-istiod ISTIO=<istio/istio checkout>
// AGW=<agentgateway checkout>`; they are not part of `make test`, since CI cannot fetch Istio's
// source.
package istiod
