// Command profile-plugins-controller is the reference wiring of this module: a controller-runtime
// manager that watches Kubeflow Profiles and runs the plugins for each, standalone. A fork of the
// profiles controller wires the same kubeflow.Integration into its own reconciler instead (see
// package kubeflow); this one calls it too, so both map a Result to a reconcile result alike.
//
//	go run ./cmd/profile-plugins-controller -config config.yaml
//
// It creates a Profile's namespace when missing, applies the plugins, writes their condition to
// the Profile's status, records events for warnings and errors, exposes Prometheus metrics, and
// revokes everything through a finalizer when the Profile is deleted. It also checks the platform
// around the user namespaces (see platform.Check and platform.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/go-logr/logr"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/buildinfo"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// defaultLeaderElectionID is the lease the Deployment's pods share (-leader-election-id).
const defaultLeaderElectionID = "profile-plugins.kubeflow-ambient.io"

func main() {
	var (
		configPath  = flag.String("config", "", "PluginConfig file (default: the documented defaults)")
		metricsAddr = flag.String("metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 turns it off")
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
		leaderElect = flag.Bool("leader-elect", false, "elect a leader, so several replicas can run")
		leaderID    = flag.String("leader-election-id", defaultLeaderElectionID, "name of the leader election lease")
		showVersion = flag.Bool("version", false, "print the version and exit")
		zapOpts     = zap.Options{}
	)
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println("profile-plugins-controller", buildinfo.Read().Version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	ctrl.Log.WithName("setup").Info("starting profile-plugins-controller", versionLog(buildinfo.Read())...)
	if err := run(*configPath, *metricsAddr, *probeAddr, *leaderElect, *leaderID); err != nil {
		fmt.Fprintln(os.Stderr, "profile-plugins-controller:", err)
		os.Exit(1)
	}
}

func run(configPath, metricsAddr, probeAddr string, leaderElect bool, leaderID string) error {
	cfg := config.Default()
	if configPath != "" {
		c, err := config.Load(configPath)
		if err != nil {
			return err
		}
		cfg = c
	}
	logConfigWarnings(ctrl.Log.WithName("setup"), cfg)
	// PodSecurity and other API warnings reach each Result, and controller-runtime's log.
	restCfg := runner.WithWarnings(ctrl.GetConfigOrDie())
	ps, err := plugins.New(cfg)
	if err != nil {
		return err
	}

	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 newScheme(),
		Cache:                  cacheOptions(ps...),
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       leaderID,
		// main returns right after the manager stops, so the lease can go at once: a rollout's
		// new pod leads within seconds instead of after the lease duration.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return err
	}
	r, err := newManagedReconciler(mgr, cfg)
	if err != nil {
		return err
	}
	r.Recorder = mgr.GetEventRecorder("profile-plugins")
	r.Metrics = NewMetrics(metrics.Registry)
	if err := setup(mgr, r, cfg.Mesh.OnDemand()); err != nil {
		return err
	}
	if err := setupPlatformCheck(mgr, &PlatformCheck{Reader: mgr.GetAPIReader(), Config: cfg, Recorder: r.Recorder,
		Findings: NewPlatformFindings(metrics.Registry), Interval: *platformInterval}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// versionLog is the start log's version fields: the first line an operator reads when asking
// which release runs.
func versionLog(info buildinfo.Info) []any {
	return []any{"version", info.Version, "goVersion", info.GoVersion}
}

// logConfigWarnings logs, one line each, what the configuration allows but the admin should know
// (a very wide ipBlocks range): validation accepted it, so this is the only place it is said.
func logConfigWarnings(logger logr.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		logger.Info("configuration warning", "warning", w)
	}
}

// newScheme registers what the plugins write and the Profile this controller watches.
func newScheme() *runtime.Scheme {
	s := runner.NewScheme()
	utilruntime.Must(profilev1.AddToScheme(s))
	return s
}

// newReconciler builds the plugin set for cfg around c, with the runner options opts.
func newReconciler(c client.Client, cfg *config.Config, opts ...runner.Option) (*Reconciler, error) {
	rn, err := plugins.NewRunner(c, cfg, opts...)
	if err != nil {
		return nil, err
	}
	return &Reconciler{Client: c, Runner: rn}, nil
}

// cacheOptions keeps the manager's cache to what the plugins own or must see: ConfigMaps only when
// the plugins made them, no Pods or Secrets at all (see plugins.CacheOptions). RoleBindings are
// cached as metadata (setup's watch and the authz plugin's list share that informer), trimmed to
// what both read (authz.TrimRoleBindingMetadata, which the authz plugin declares). EndpointSlices
// keep only the labels ps read (runner.EndpointSliceTransform), so give it the plugins the
// reconciler runs.
func cacheOptions(ps ...plugin.Plugin) cache.Options {
	return plugins.CacheOptions(ps...)
}

// newManagedReconciler is newReconciler reading through mgr's cache (built from cacheOptions of
// cfg's plugins), and past it through its API reader for what the cache does not hold: pods, when
// a decision needs them, and wanted names of the kinds the cache selects (plugins.WithManager).
func newManagedReconciler(mgr ctrl.Manager, cfg *config.Config) (*Reconciler, error) {
	ps, err := plugins.New(cfg)
	if err != nil {
		return nil, err
	}
	return newReconciler(mgr.GetClient(), cfg, plugins.WithManager(mgr, cacheOptions(ps...)))
}

// setup watches Profiles and everything the plugins make for them (each carries the Profile as
// controller owner), so a Gateway becoming Programmed reconciles its Profile at once; the
// ConfigMap watch sees only the plugins' own (cacheOptions). Every Namespace reconciles the
// Profile of its name, whoever owns it: a namespace handed over by its owner annotation carries no
// controller reference, so Owns would miss a label someone changed there until the resync. It also
// watches kfam's contributor RoleBindings and policies, so adding or removing a contributor
// reconciles the namespace's Profile at once rather than at some unrelated event.
//
// A watch of a kind whose CRD is not installed never syncs, and then the controller never starts
// ("if kind is a CRD, it should be installed before calling Start"). Sidecar and none mode need
// no Gateway API, and none mode no Istio, so only what the API server serves at start is watched
// from the start; a kind served later is watched from when it is (laterWatches), without a
// restart: a controller started already starts a watch added to it at once, and the manager's
// RESTMapper discovers a group it did not know when asked for it.
func setup(mgr ctrl.Manager, r reconcile.Reconciler, onDemand bool) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&profilev1.Profile{}).
		// A Profile nobody has answered yet (a new user's) goes ahead of the fleet's re-decisions
		// after a restart (issue #32 item 7).
		Watches(&profilev1.Profile{}, kubeflow.EnqueueNewProfilesFirst()).
		Watches(&corev1.Namespace{}, kubeflow.EnqueueProfileOfSameName()).
		// Not Owns: it follows a controller reference by name from any namespace.
		Watches(&corev1.ConfigMap{}, kubeflow.EnqueueProfileOfOwner(mgr.GetClient())).
		// kfam marks its bindings only with annotations, which no label or field selector can
		// select, so every RoleBinding is cached, but as metadata only (no subjects or roleRefs),
		// and of that only names, times, kfam's two annotations (bounded) and the plugins' labels
		// (cacheOptions' transform), so a tenant's bindings cannot fill the controller's memory:
		// the authz plugin lists them as metadata too and so shares this cache. The predicate
		// reads kfam's annotations, which the transform keeps.
		Watches(&rbacv1.RoleBinding{}, kubeflow.EnqueueProfileOfNamespace(),
			builder.OnlyMetadata, builder.WithPredicates(contributorAnnotated))
	later := &laterWatches{mgr: mgr, interval: laterWatchInterval, resync: make(chan event.GenericEvent)}
	for _, w := range crdWatches(mgr) {
		ok, err := served(mgr, w.obj)
		if err != nil {
			return err
		}
		if !ok {
			ctrl.Log.Info("not watching a kind the API server does not serve; it is watched once its CRD is installed",
				"kind", fmt.Sprintf("%T", w.obj))
			later.pending = append(later.pending, w)
			continue
		}
		for _, src := range w.sources {
			b = b.WatchesRawSource(src)
		}
	}
	if len(later.pending) > 0 {
		b = b.WatchesRawSource(source.Channel(later.resync, &handler.EnqueueRequestForObject{}))
	}
	if onDemand {
		// provision onDemand: a Service endpoint appearing or going (re)decides its namespace's
		// waypoint. The cache holds the slices trimmed (runner.EndpointSliceTransform), and an update
		// reconciles only when it changes what the decision reads.
		b = b.Watches(&discoveryv1.EndpointSlice{}, kubeflow.EnqueueProfileOfNamespace(), builder.WithPredicates(servingChanged))
	}
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	if len(later.pending) == 0 {
		return nil
	}
	later.ctrl = c
	return mgr.Add(later)
}

// crdWatch is the watches of one kind that a CRD serves.
type crdWatch struct {
	obj     client.Object
	sources []source.TypedSource[reconcile.Request]
}

// crdWatches are the watches of the kinds CRDs serve: the Gateways the plugins make, their
// policies, and kfam's contributor policies, which carry no owner reference (watching them, from
// the cache the owned ones fill already, lets a policy kfam made for a refused user be reported
// at once).
func crdWatches(mgr ctrl.Manager) []crdWatch {
	owned := func(obj client.Object) source.TypedSource[reconcile.Request] {
		return source.Kind(mgr.GetCache(), obj, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(),
			&profilev1.Profile{}, handler.OnlyControllerOwner()))
	}
	return []crdWatch{
		{obj: &gatewayv1.Gateway{}, sources: []source.TypedSource[reconcile.Request]{owned(&gatewayv1.Gateway{})}},
		{obj: &istiosecurityv1.AuthorizationPolicy{}, sources: []source.TypedSource[reconcile.Request]{
			owned(&istiosecurityv1.AuthorizationPolicy{}),
			source.Kind(mgr.GetCache(), client.Object(&istiosecurityv1.AuthorizationPolicy{}), kubeflow.EnqueueProfileOfNamespace(), contributorAnnotated),
		}},
	}
}

// laterWatchInterval is how often laterWatches asks whether a kind not served at start is served.
var laterWatchInterval = 30 * time.Second

// laterWatches adds the watches of the kinds the API server did not serve at start once it
// does: a CRD installed after the controller started (the Gateway API for a switch to ambient) is
// watched without a restart. Until then the runner's requeue while it waits stands in for the
// watch.
//
// A watch added to a running controller starts its informer without waiting for it to sync
// (controller-runtime's Controller.Watch), and an object deleted before the informer's first list
// leaves no event: a waypoint made by a retry just after the CRD appeared, then deleted, would wait
// for the next requeue. So once the new watches have synced, every Profile is reconciled once
// (resync), and what changed while they started is seen.
type laterWatches struct {
	mgr      ctrl.Manager
	ctrl     controller.Controller
	interval time.Duration
	pending  []crdWatch
	resync   chan event.GenericEvent
}

// Start implements manager.Runnable: it polls until every pending kind is watched.
func (l *laterWatches) Start(ctx context.Context) error {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for len(l.pending) > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var still []crdWatch
		added := false
		for _, w := range l.pending {
			if ok, err := served(l.mgr, w.obj); err != nil || !ok {
				still = append(still, w)
				continue
			}
			if err := l.watch(ctx, w); err != nil {
				return err
			}
			added = true
		}
		l.pending = still
		if added {
			if err := l.reconcileEveryProfile(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// watch adds w's sources to the controller and waits for them to sync.
func (l *laterWatches) watch(ctx context.Context, w crdWatch) error {
	for _, src := range w.sources {
		if err := l.ctrl.Watch(src); err != nil {
			return fmt.Errorf("watching %T, served since the controller started: %w", w.obj, err)
		}
		if s, ok := src.(interface{ WaitForSync(context.Context) error }); ok {
			if err := s.WaitForSync(ctx); err != nil {
				return fmt.Errorf("syncing the watch of %T, served since the controller started: %w", w.obj, err)
			}
		}
	}
	ctrl.Log.Info("watching a kind the API server serves since the controller started", "kind", fmt.Sprintf("%T", w.obj))
	return nil
}

// reconcileEveryProfile queues every cached Profile once, through the controller's resync source.
func (l *laterWatches) reconcileEveryProfile(ctx context.Context) error {
	profiles := &profilev1.ProfileList{}
	if err := l.mgr.GetClient().List(ctx, profiles); err != nil {
		return fmt.Errorf("listing Profiles to reconcile once the new watches synced: %w", err)
	}
	for i := range profiles.Items {
		select {
		case l.resync <- event.GenericEvent{Object: &profiles.Items[i]}:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica's controller
// watches, leader or not.
func (l *laterWatches) NeedLeaderElection() bool { return false }

// served reports whether the API server serves obj's kind.
func served(mgr ctrl.Manager, obj client.Object) (bool, error) {
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return false, err
	}
	_, err = mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	return err == nil, err
}

// contributorAnnotated passes the objects (kfam's RoleBindings and policies) that carry kfam's
// contributor annotations, before or after the change, and so skips the many RoleBindings that
// say nothing about contributors.
var contributorAnnotated = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return hasContributorAnnotations(e.Object) },
	DeleteFunc: func(e event.DeleteEvent) bool { return hasContributorAnnotations(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return hasContributorAnnotations(e.ObjectOld) || hasContributorAnnotations(e.ObjectNew)
	},
	GenericFunc: func(e event.GenericEvent) bool { return hasContributorAnnotations(e.Object) },
}

func hasContributorAnnotations(o client.Object) bool {
	role := o.GetAnnotations()[authz.RoleAnnotation]
	return o.GetAnnotations()[authz.UserAnnotation] != "" && (role == authz.RoleEdit || role == authz.RoleView)
}

// servingChanged lets through every EndpointSlice created or deleted, and an update only when it
// changes whether the slice serves (plugin.Serving) or its labels (the cache keeps only those that
// decide whether it counts):
// a pod's readiness flipping does not reconcile its Profile.
var servingChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*discoveryv1.EndpointSlice)
	n, ok2 := e.ObjectNew.(*discoveryv1.EndpointSlice)
	if !ok1 || !ok2 {
		return true
	}
	return plugin.Serving(o) != plugin.Serving(n) || !maps.Equal(o.Labels, n.Labels)
}}
