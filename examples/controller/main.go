// Command controller is the reference wiring of this module: a controller-runtime manager that
// watches Kubeflow Profiles and runs the plugins for each, standalone. A fork of the profiles
// controller wires the same Runner into its own reconciler instead (see plugin/kubeflow).
//
//	go run ./examples/controller -config config.yaml
//
// It creates a Profile's namespace when missing, applies the plugins, writes their condition to
// the Profile's status, records events for warnings and errors, exposes Prometheus metrics, and
// revokes everything through a finalizer when the Profile is deleted.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
	"github.com/kubeflow-ambient/profile-plugins/plugin/profilev1"
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
		fmt.Fprintln(os.Stderr, "controller:", err)
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
	// PodSecurity and other API warnings reach each Result, and controller-runtime's log.
	restCfg := plugin.WithWarnings(ctrl.GetConfigOrDie())

	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 newScheme(),
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       leaderID,
	})
	if err != nil {
		return err
	}
	r, err := newReconciler(mgr.GetClient(), cfg)
	if err != nil {
		return err
	}
	r.Recorder = mgr.GetEventRecorder("profile-plugins")
	r.Metrics = NewMetrics(metrics.Registry)
	if err := setup(mgr, r); err != nil {
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

// newScheme registers what the plugins write and the Profile this controller watches.
func newScheme() *runtime.Scheme {
	s := plugin.NewScheme()
	utilruntime.Must(profilev1.AddToScheme(s))
	return s
}

// newReconciler builds the plugin set for cfg around c.
func newReconciler(c client.Client, cfg *config.Config) (*Reconciler, error) {
	ps, err := plugins.New(cfg)
	if err != nil {
		return nil, err
	}
	runner, err := plugin.NewRunner(c, ps...)
	if err != nil {
		return nil, err
	}
	return &Reconciler{Client: c, Runner: runner}, nil
}

// setup watches Profiles and everything the plugins make for them (each carries the Profile as
// controller owner), so a Gateway becoming Programmed reconciles its Profile at once.
func setup(mgr ctrl.Manager, r *Reconciler) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&profilev1.Profile{}).
		Owns(&corev1.Namespace{}).
		Owns(&gatewayv1.Gateway{}).
		Owns(&istiosecurityv1.AuthorizationPolicy{}).
		Owns(&corev1.ConfigMap{}).
		Complete(r)
}
