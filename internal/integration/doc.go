// Package integration holds tests that need a real API server (internal/envtest): the golden
// files must be accepted by the real Istio and Gateway API CRD schemas, and a namespace set up by
// an earlier release (testdata/upgrade) converges to what the runner wants now, with no fail-open
// state after any single write on the way.
//
// The tests share the package's API servers (envtest.Start, StartWithout, and guardedEnv's for
// the guard), each in Profiles and namespaces of its own, and run in parallel; those that count
// the API server's requests (env.Requests) or measure what a manager's cache holds would count
// the other tests' too, so they do not call t.Parallel and run first, alone. A test that installs
// or removes CRDs has a server of its own (envtest.StartFresh). The admission guard's tests that
// need no controller are in package guard.
package integration
