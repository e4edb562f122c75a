// Package envtest starts a real API server (kube-apiserver and etcd from bin/, built by
// `make envtest`) with the real Istio, Gateway API and Profile CRDs, for the integration tests;
// [StartWithout] starts one that lacks some of them.
//
// The binaries are found through KUBEBUILDER_ASSETS, which `make test` sets. When they are
// missing, Start fails the test with the command that builds them: integration tests never skip.
package envtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
)

// BuildCommand builds the API server binaries into bin/.
const BuildCommand = "make envtest"

// Env is a running API server.
type Env struct {
	// Config counts its requests in Requests; Base is the same server without counting.
	Config, Base *rest.Config
	Client       client.Client
	// Requests counts the requests sent through Config, by HTTP method.
	Requests *Counter
}

// CountRequests returns a copy of cfg whose requests are counted by the returned Counter.
func CountRequests(cfg *rest.Config) (*rest.Config, *Counter) {
	counter := &Counter{counts: map[string]int{}}
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, c: counter} }
	return cfg, counter
}

// Counter counts requests by HTTP method (GET, LIST is a GET too, PATCH, POST, PUT, DELETE).
type Counter struct {
	mu     sync.Mutex
	counts map[string]int
}

// Writes is the number of requests that can change state.
func (c *Counter) Writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[http.MethodPost] + c.counts[http.MethodPut] + c.counts[http.MethodPatch] + c.counts[http.MethodDelete]
}

// Get returns the count of one HTTP method.
func (c *Counter) Get(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[method]
}

// Snapshot returns a copy of the counts.
func (c *Counter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

type countingTransport struct {
	next http.RoundTripper
	c    *Counter
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.c.mu.Lock()
	t.c.counts[r.Method]++
	t.c.mu.Unlock()
	return t.next.RoundTrip(r)
}

// forScale is set by ForScale before any server starts.
var forScale bool

// ForScale raises, for an API server started after it, the limits a benchmark with tens of
// thousands of namespaces and their clutter meets first: etcd's 2 GiB backend quota, the API
// server's in-flight request limits (400 reads, 200 writes by default) and its Service IP range.
func ForScale() { forScale = true }

// CRDs names sets of CRDs a test API server can leave out, to prove what works on a cluster
// without them.
type CRDs int

const (
	// GatewayAPI is the Gateway API's standard CRDs (gateways.gateway.networking.k8s.io, ...).
	GatewayAPI CRDs = 1 << iota
	// Istio is Istio's CRDs (authorizationpolicies.security.istio.io, ...).
	Istio
)

var (
	mu      sync.Mutex
	servers = map[serverKey]*server{}
)

// serverKey names a shared server: the CRD sets it lacks and, for StartNamed, its name.
type serverKey struct {
	left CRDs
	name string
}

type server struct {
	env   *Env
	err   error
	stop  func() error
	ready chan struct{} // closed once started (or failed to)
}

// Start returns the package's API server with every CRD, starting it on first use. Call Stop
// from TestMain.
func Start(t testing.TB) *Env {
	t.Helper()
	return StartWithout(t, 0)
}

// StartWithout returns an API server that lacks the CRD sets in left (0: none), starting it on
// first use; each set of left-out CRDs gets its own server, shared within the package's tests.
func StartWithout(t testing.TB, left CRDs) *Env {
	t.Helper()
	return shared(t, serverKey{left: left})
}

// StartNamed returns the package's API server called name, with every CRD, starting it on first
// use: a server apart for the tests that share a cluster-scoped setup (the guard of one
// configuration, say) which the package's other tests must not see.
func StartNamed(t testing.TB, name string) *Env {
	t.Helper()
	return shared(t, serverKey{name: name})
}

// shared returns the server of key, starting it on first use; tests in parallel that ask for
// different servers start them at the same time.
func shared(t testing.TB, key serverKey) *Env {
	t.Helper()
	mu.Lock()
	s, ok := servers[key]
	if !ok {
		s = &server{ready: make(chan struct{})}
		servers[key] = s
		mu.Unlock()
		func() {
			defer close(s.ready) // also when assetsDir fails the test
			s.err = errors.New("the binaries are missing")
			dir := assetsDir(t)
			s.env, s.stop, s.err = start(t, dir, key.left)
		}()
	} else {
		mu.Unlock()
		<-s.ready
	}
	if s.err != nil {
		t.Fatalf("starting the test API server: %v", s.err)
	}
	return s.env
}

// Main runs a package's tests and then stops the API server; call it from TestMain. It silences
// controller-runtime's logger, whose start-up warning would otherwise break into benchmark output.
func Main(m *testing.M) {
	log.SetLogger(logr.Discard())
	code := m.Run()
	if err := Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test API server:", err)
		code = 1
	}
	os.Exit(code)
}

// assetsDir is the directory of the API server binaries; it fails the test when they are missing.
func assetsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(golden.ModuleRoot(t), "bin")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			t.Fatalf("the integration tests need %s in %s (KUBEBUILDER_ASSETS); build it with: %s", bin, dir, BuildCommand)
		}
	}
	return dir
}

// Stop stops the API servers that were started.
func Stop() error {
	mu.Lock()
	defer mu.Unlock()
	var errs []error
	for key, s := range servers {
		if s.stop != nil {
			errs = append(errs, s.stop())
		}
		delete(servers, key)
	}
	return errors.Join(errs...)
}

// crdPaths are the files and directories of the CRD sets in set.
func crdPaths(set CRDs) ([]string, error) {
	var paths []string
	if set&Istio != 0 {
		istioCRDs, err := moduleFile("istio.io/api", "kubernetes", "customresourcedefinitions.gen.yaml")
		if err != nil {
			return nil, err
		}
		paths = append(paths, istioCRDs)
	}
	if set&GatewayAPI != 0 {
		gatewayCRDs, err := moduleFile("sigs.k8s.io/gateway-api", "config", "crd", "standard")
		if err != nil {
			return nil, err
		}
		paths = append(paths, gatewayCRDs)
	}
	return paths, nil
}

// StartFresh starts an API server of the test's own that lacks the CRD sets in left, so the test
// may install or remove CRDs (InstallCRDs, UninstallCRDs); it stops when the test ends.
func StartFresh(t testing.TB, left CRDs) *Env {
	t.Helper()
	env, stop, err := start(t, assetsDir(t), left)
	if stop != nil {
		t.Cleanup(func() {
			if err := stop(); err != nil {
				t.Errorf("stopping the test API server: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("starting the test API server: %v", err)
	}
	return env
}

// InstallCRDs installs the CRD sets in set and waits until the API server serves them.
func (e *Env) InstallCRDs(t testing.TB, set CRDs) {
	t.Helper()
	paths, err := crdPaths(set)
	if err == nil {
		_, err = crenvtest.InstallCRDs(e.Base, crenvtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true})
	}
	if err != nil {
		t.Fatalf("installing CRDs: %v", err)
	}
}

// UninstallCRDs deletes the CRD sets in set; the API server then deletes their objects and stops
// serving them, a moment later.
func (e *Env) UninstallCRDs(t testing.TB, set CRDs) {
	t.Helper()
	paths, err := crdPaths(set)
	if err == nil {
		err = crenvtest.UninstallCRDs(e.Base, crenvtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true})
	}
	if err != nil {
		t.Fatalf("uninstalling CRDs: %v", err)
	}
}

func start(t testing.TB, assets string, left CRDs) (*Env, func() error, error) {
	paths, err := crdPaths((GatewayAPI | Istio) &^ left)
	if err != nil {
		return nil, nil, err
	}
	dirs := append(paths, filepath.Join(golden.ModuleRoot(t), "testdata", "crds"))
	env := &crenvtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     dirs,
		ErrorIfCRDPathMissing: true,
		Scheme:                NewScheme(),
		// A maximum, not a wait: controller-runtime's 10 s default runs out on a loaded
		// machine (seen with two cores shared by five test runs) before the CRDs are served.
		CRDInstallOptions: crenvtest.CRDInstallOptions{MaxTime: 2 * time.Minute},
	}
	if forScale {
		env.ControlPlane.Etcd = &crenvtest.Etcd{}
		env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", "17179869184")
		env.ControlPlane.GetAPIServer().Configure().
			Set("max-requests-inflight", "3000").
			Set("max-mutating-requests-inflight", "1500").
			// envtest's default /24 holds 254 Services; the cost benchmark makes one per namespace.
			Set("service-cluster-ip-range", "10.0.0.0/16")
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, err
	}
	base := rest.CopyConfig(cfg)
	base.WarningHandlerWithContext = runner.WarningHandler{}
	counted, counter := CountRequests(base)
	c, err := client.New(counted, client.Options{Scheme: NewScheme()})
	if err != nil {
		return nil, env.Stop, err
	}
	return &Env{Config: counted, Base: base, Client: c, Requests: counter}, env.Stop, nil
}

// moduleFile finds a path inside a module of the build, through the go command (so the CRDs are
// the ones of the versions go.mod selects, from the module cache).
func moduleFile(module string, elem ...string) (string, error) {
	out, err := exec.CommandContext(context.Background(), "go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{strings.TrimSpace(string(out))}, elem...)...), nil
}

// NewScheme is the plugins' scheme plus this module's Profile type, as a standalone controller
// (and the tests that stand in for the profiles controller) registers them.
func NewScheme() *runtime.Scheme {
	s := runner.NewScheme()
	utilruntime.Must(profilev1.AddToScheme(s))
	return s
}
