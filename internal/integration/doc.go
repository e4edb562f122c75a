// Package integration holds tests that need a real API server (internal/envtest): the golden
// files must be accepted by the real Istio and Gateway API CRD schemas.
package integration
