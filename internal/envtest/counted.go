package envtest

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Counted is the same server with a Config and Client of the test's own, whose requests Requests
// counts apart from other tests': on a shared server, e.Requests counts every test's.
func (e *Env) Counted(t testing.TB) *Env {
	t.Helper()
	cfg, counter := CountRequests(e.Base)
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatalf("a counted client of the test API server: %v", err)
	}
	return &Env{Config: cfg, Base: e.Base, Client: c, Requests: counter}
}
