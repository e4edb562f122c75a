// Package integration holds tests that need a real API server (internal/envtest): the golden
// files must be accepted by the real Istio and Gateway API CRD schemas, and a namespace set up by
// an earlier release (testdata/upgrade) converges to what the runner wants now, with no fail-open
// state after any single write on the way.
package integration
