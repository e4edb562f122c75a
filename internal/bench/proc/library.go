package proc

import (
	"context"
	"errors"
	"sync"

	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// The library's wiring is kept in the three functions below, each a copy of what
// cmd/profile-plugins-controller does (its main is package main, so it cannot be imported). When
// the reference wiring changes, change these with it. Reads through the API reader reach the API
// server and so are counted in reads/ns.

// libraryManager is cmd/profile-plugins-controller's run: ctrl.NewManager with its scheme and the
// cache options of the plugins of cfg (profileplugins.CacheOptions), the rest.Config wrapped by
// WithWarnings; metrics and probes are off here.
func libraryManager(restCfg *rest.Config, cache cache.Options) (manager.Manager, error) {
	return ctrl.NewManager(runner.WithWarnings(restCfg), ctrl.Options{
		Scheme:  newScheme(),
		Cache:   cache,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
}

// libraryCache is cmd/profile-plugins-controller's cacheOptions for the plugins of cfg.
func libraryCache(cfg *config.Config) (cache.Options, error) {
	ps, err := profileplugins.New(cfg)
	if err != nil {
		return cache.Options{}, err
	}
	return profileplugins.CacheOptions(ps...), nil
}

// libraryWatches are the informers cmd/profile-plugins-controller's setup opens with For, Owns and
// Watches (RoleBindings as metadata only, builder.OnlyMetadata; EndpointSlices with waypoints
// provisioned onDemand). The runner opens the rest itself on its first read through the manager's
// client, as it would in the controller.
func libraryWatches(cfg *config.Config) []client.Object {
	rb := &metav1.PartialObjectMetadata{}
	rb.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
	watches := []client.Object{&profilev1.Profile{}, &corev1.Namespace{}, &gatewayv1.Gateway{},
		&istiosecurityv1.AuthorizationPolicy{}, &corev1.ConfigMap{}, rb}
	if cfg.Mesh.OnDemand() {
		watches = append(watches, &discoveryv1.EndpointSlice{})
	}
	return watches
}

// libraryRunner is cmd/profile-plugins-controller's newManagedReconciler: profileplugins.NewRunner
// around the manager's client, reading past the cache as profileplugins.WithManager sets it up for
// the manager's cache options.
func libraryRunner(mgr manager.Manager, c client.Client, cfg *config.Config, cache cache.Options) (*runner.Runner, error) {
	return profileplugins.NewRunner(c, cfg, profileplugins.WithManager(mgr, cache))
}

// newScheme registers what the plugins write and the Profile, as cmd/profile-plugins-controller
// does.
func newScheme() *runtime.Scheme {
	s := runner.NewScheme()
	utilruntime.Must(profilev1.AddToScheme(s))
	return s
}

type library struct {
	mgr     manager.Manager
	cache   cache.Options
	client  client.Client
	track   *tracker
	mu      sync.Mutex
	runners map[*config.Config]*runner.Runner
}

// startLibrary starts the library's manager as the reference controller would for configuration
// cfg (its cache options and watches; the passes may then change the user-id header, which changes
// neither).
func startLibrary(ctx context.Context, restCfg *rest.Config, cfg *config.Config) (*library, error) {
	co, err := libraryCache(cfg)
	if err != nil {
		return nil, err
	}
	mgr, err := libraryManager(restCfg, co)
	if err != nil {
		return nil, err
	}
	if err := startManager(ctx, mgr, libraryWatches(cfg)); err != nil {
		return nil, err
	}
	track := newTracker(mgr.GetScheme())
	return &library{mgr: mgr, cache: co, client: track.wrap(withWatch{mgr.GetClient()}), track: track, runners: map[*config.Config]*runner.Runner{}}, nil
}

func (l *library) runner(cfg *config.Config) (*runner.Runner, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.runners[cfg]; ok {
		return r, nil
	}
	r, err := libraryRunner(l.mgr, l.client, cfg, l.cache)
	if err == nil {
		l.runners[cfg] = r
	}
	return r, err
}

func (l *library) reconcile(ctx context.Context, cfg *config.Config, ns string) error {
	r, err := l.runner(cfg)
	if err != nil {
		return err
	}
	return r.Apply(ctx, profileOf(ns)).Err()
}

// settle reads through the runner's own reader, so it opens no informer the runner did not.
func (l *library) settle(ctx context.Context) error {
	var reader client.Reader = l.client
	for _, r := range l.runners {
		if r.Reader != nil {
			reader = r.Reader
		}
	}
	return l.track.wait(ctx, reader)
}

// profileOf is the Profile of namespace ns, as the benchmark's namespaces are annotated for it.
func profileOf(ns string) *profilev1.Profile {
	return &profilev1.Profile{
		ObjectMeta: metav1.ObjectMeta{Name: ns, UID: types.UID("uid-" + ns)},
		Spec:       profilev1.ProfileSpec{Owner: rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: Owner(ns)}},
	}
}

// Owner is the owner of namespace ns's Profile; the benchmark annotates the namespace with it.
func Owner(ns string) string { return ns + "@example.com" }

// startManager starts mgr and opens an informer for each of watches, as a controller's watches
// do, returning once they are synced.
func startManager(ctx context.Context, mgr manager.Manager, watches []client.Object) error {
	errs := make(chan error, 1)
	go func() { errs <- mgr.Start(ctx) }()
	for _, obj := range watches {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return err
		}
	}
	select {
	case err := <-errs:
		return err
	default:
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return context.Cause(ctx)
	}
	return nil
}

// withWatch gives a client without Watch the method interceptor.NewClient asks for; nothing
// here watches through it.
type withWatch struct{ client.Client }

func (withWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("the benchmark's client does not watch")
}
