package envtest

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// keyed holds the servers of StartKeyed, by key; Stop stops them too.
var keyed = map[string]*server{}

// StartKeyed returns the package's API server for key, with every CRD, starting it on first use.
// It is for tests that change what the whole cluster sees (a namespace kubeflow, the guard's
// admission policies, an overlay's ClusterRoles), which the tests on Start's server must not
// meet: each such configuration gets one server per package, shared by the tests that need it
// (which then run one after another, or keep to names of their own).
func StartKeyed(t testing.TB, key string) *Env {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	s, ok := keyed[key]
	if !ok {
		s = &server{}
		s.env, s.stop, s.err = start(t, assetsDir(t), 0)
		keyed[key] = s
	}
	if s.err != nil {
		t.Fatalf("starting the test API server %q: %v", key, s.err)
	}
	return s.env
}

// stopKeyed stops the servers of StartKeyed; mu is held.
func stopKeyed() []error {
	var errs []error
	for key, s := range keyed {
		if s.stop != nil {
			errs = append(errs, s.stop())
		}
		delete(keyed, key)
	}
	return errs
}

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
