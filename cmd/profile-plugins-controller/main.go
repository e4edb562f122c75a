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
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

func main() {
	var (
		configPath  = flag.String("config", "", "PluginConfig file (default: the documented defaults)")
		metricsAddr = flag.String("metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 turns it off")
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
		leaderElect = flag.Bool("leader-elect", false, "elect a leader, so several replicas can run")
		leaderID    = flag.String("leader-election-id", "profile-plugins.kubeflow-ambient.io", "name of the leader election lease")
		zapOpts     = zap.Options{}
	)
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
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

	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 newScheme(),
		Cache:                  cacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       leaderID,
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
	if err := setup(mgr, r); err != nil {
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
// cached as metadata (setup's watch and the authz plugin's list share that informer).
func cacheOptions() cache.Options {
	return plugins.CacheOptions()
}

// newManagedReconciler is newReconciler reading through mgr's cache (built from cacheOptions), and
// past it through its API reader for what the cache does not hold: pods, when a decision needs
// them, and wanted names of the kinds the cache selects (plugins.WithManager).
func newManagedReconciler(mgr ctrl.Manager, cfg *config.Config) (*Reconciler, error) {
	return newReconciler(mgr.GetClient(), cfg, plugins.WithManager(mgr, cacheOptions()))
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
// no Gateway API, and none mode no Istio, so only what the API server serves at start is watched;
// a CRD installed later is watched after a restart, and until then the runner's requeue while it
// waits stands in for the watch.
func setup(mgr ctrl.Manager, r reconcile.Reconciler) error {
	gateways, err := served(mgr, &gatewayv1.Gateway{})
	if err != nil {
		return err
	}
	policies, err := served(mgr, &istiosecurityv1.AuthorizationPolicy{})
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&profilev1.Profile{}).
		Watches(&corev1.Namespace{}, kubeflow.EnqueueProfileOfSameName()).
		// Not Owns: it follows a controller reference by name from any namespace.
		Watches(&corev1.ConfigMap{}, kubeflow.EnqueueProfileOfOwner(mgr.GetClient())).
		// kfam marks its bindings only with annotations, which no label or field selector can
		// select, so every RoleBinding is cached, but as metadata only (no subjects or roleRefs):
		// the authz plugin lists them as metadata too and so shares this cache.
		Watches(&rbacv1.RoleBinding{}, kubeflow.EnqueueProfileOfNamespace(),
			builder.OnlyMetadata, builder.WithPredicates(contributorAnnotated))
	if gateways {
		b = b.Owns(&gatewayv1.Gateway{})
	}
	if policies {
		// kfam's own contributor policies carry no owner reference; watching them (from the
		// cache Owns already fills) lets a policy kfam made for a refused user be reported at once.
		b = b.Owns(&istiosecurityv1.AuthorizationPolicy{}).
			Watches(&istiosecurityv1.AuthorizationPolicy{}, kubeflow.EnqueueProfileOfNamespace(),
				builder.WithPredicates(contributorAnnotated))
	}
	return b.Complete(r)
}

// served reports whether the API server serves obj's kind, and logs it when it does not.
func served(mgr ctrl.Manager, obj client.Object) (bool, error) {
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return false, err
	}
	_, err = mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		ctrl.Log.Info("not watching a kind the API server does not serve; install its CRD and restart to watch it",
			"kind", gvk.String())
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
