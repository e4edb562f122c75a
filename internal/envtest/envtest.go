// Package envtest starts a real API server (kube-apiserver and etcd from bin/, built by
// `make envtest`) with the real Istio, Gateway API and Profile CRDs, for the integration tests.
//
// The binaries are found through KUBEBUILDER_ASSETS, which `make test` sets. When they are
// missing, Start fails the test with the command that builds them: integration tests never skip.
package envtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/kubeflow-ambient/profile-plugins/plugin/profilev1"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
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

var (
	shared    *Env
	sharedErr error
	once      sync.Once
	stop      func() error
	forScale  bool
)

// ForScale raises, for an API server started after it, the limits a benchmark with tens of
// thousands of namespaces and their clutter meets first: etcd's 2 GiB backend quota and the API
// server's in-flight request limits (400 reads, 200 writes by default).
func ForScale() { forScale = true }

// Start returns the package's API server, starting it on first use. Call Stop from TestMain.
func Start(t testing.TB) *Env {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(golden.ModuleRoot(t), "bin")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			t.Fatalf("the integration tests need %s in %s (KUBEBUILDER_ASSETS); build it with: %s", bin, assets, BuildCommand)
		}
	}
	once.Do(func() { shared, sharedErr = start(t, assets) })
	if sharedErr != nil {
		t.Fatalf("starting the test API server: %v", sharedErr)
	}
	return shared
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

// Stop stops the API server if it was started.
func Stop() error {
	if stop == nil {
		return nil
	}
	return stop()
}

func start(t testing.TB, assets string) (*Env, error) {
	istioCRDs, err := moduleFile("istio.io/api", "kubernetes", "customresourcedefinitions.gen.yaml")
	if err != nil {
		return nil, err
	}
	gatewayCRDs, err := moduleFile("sigs.k8s.io/gateway-api", "config", "crd", "standard")
	if err != nil {
		return nil, err
	}
	env := &crenvtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths: []string{
			istioCRDs, gatewayCRDs,
			filepath.Join(golden.ModuleRoot(t), "testdata", "crds"),
		},
		ErrorIfCRDPathMissing: true,
		Scheme:                NewScheme(),
	}
	if forScale {
		env.ControlPlane.Etcd = &crenvtest.Etcd{}
		env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", "17179869184")
		env.ControlPlane.GetAPIServer().Configure().
			Set("max-requests-inflight", "3000").
			Set("max-mutating-requests-inflight", "1500")
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, err
	}
	stop = env.Stop
	base := rest.CopyConfig(cfg)
	base.WarningHandlerWithContext = plugin.WarningHandler{}
	counted, counter := CountRequests(base)
	c, err := client.New(counted, client.Options{Scheme: NewScheme()})
	if err != nil {
		return nil, err
	}
	return &Env{Config: counted, Base: base, Client: c, Requests: counter}, nil
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
	s := plugin.NewScheme()
	utilruntime.Must(profilev1.AddToScheme(s))
	return s
}
