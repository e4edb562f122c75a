// Command fork is the wiring a fork of the Kubeflow profiles controller (kubeflow/dashboard,
// components/profile-controller) adds to run profile-plugins, as a program that compiles and runs:
// main.go is the controller's main.go with its additions, reconciler.go its ProfileReconciler with
// the two calls and the watches. The controller's own work (RoleBindings, quotas, kfam) is left
// out; what stays of it is what the calls depend on: the namespace the reconciler makes, annotated
// with the owner and controlled by the Profile, and the finalizer.
//
//	go run ./examples/fork -kubeconfig ~/.kube/config -service-mesh-mode istio-ambient -userid-header kubeflow-userid -userid-prefix ""
//
// It needs the Istio, Gateway API and Profile CRDs in the cluster, and the RBAC of
// deploy/rbac/role.yaml. The README's "Wire it into the profiles controller" explains each block.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// options are main's flags, so that a test can run the program against its own API server.
type options struct {
	// pluginConfig is the admin's PluginConfig file; "" means the documented defaults.
	pluginConfig string
	// controller holds the profiles controller's own flags and environment that the plugins
	// take over (the user-id header and prefix, the mesh mode, the principals).
	controller  kubeflow.ControllerSettings
	metricsAddr string
}

func main() {
	var o options
	// The profiles controller's flags, with its defaults.
	flag.StringVar(&o.controller.UserIDHeader, "userid-header", "x-goog-authenticated-user-email", "the header the ingress gateway puts the user id in")
	flag.StringVar(&o.controller.UserIDPrefix, "userid-prefix", "accounts.google.com:", "the prefix of the user id in that header")
	flag.StringVar(&o.controller.ServiceMeshMode, "service-mesh-mode", kubeflow.ServiceMeshSidecar, "istio-sidecar or istio-ambient")
	flag.StringVar(&o.controller.WaypointName, "waypoint-name", "", "the waypoint of each user namespace")
	flag.StringVar(&o.controller.WaypointNamespace, "waypoint-namespace", "", "must stay empty: each namespace has its own waypoint")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "the address of the metrics endpoint")
	// The fork's one new flag.
	flag.StringVar(&o.pluginConfig, "profile-plugins-config", "", "PluginConfig file of profile-plugins (default: its defaults)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	o.controller.Env = os.Getenv

	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), o); err != nil {
		ctrl.Log.WithName("setup").Error(err, "profiles controller")
		os.Exit(1)
	}
}

// run builds the manager and the runner, and runs the reconciler until ctx ends.
func run(ctx context.Context, restConfig *rest.Config, o options) error {
	setupLog := ctrl.Log.WithName("setup")
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	// The controller's own Profile type; this example borrows the module's (a fork registers its
	// api/v1, and kubeflow.Integration converts it).
	utilruntime.Must(profilev1.AddToScheme(scheme))
	// Only core, Istio security/v1 and Gateway API v1: never a Profile.
	utilruntime.Must(profileplugins.AddToScheme(scheme))

	// The admin's file first; the controller's flags keep their meaning on top of it.
	pluginConfig, err := profileplugins.LoadConfig(o.pluginConfig)
	if err == nil {
		o.controller.Base = pluginConfig
		pluginConfig, err = kubeflow.ConfigFromController(o.controller)
	}
	if err != nil {
		return fmt.Errorf("configuring profile-plugins: %w", err)
	}
	for _, w := range pluginConfig.Warnings() {
		setupLog.Info("profile-plugins configuration warning", "warning", w)
	}

	// The cache holds only the ConfigMaps the plugins made, no Pods, and of EndpointSlices only
	// the labels these plugins read (mesh.waypoint.ignoredServices' keys); API warnings (Pod
	// Security's "existing pods violate ...") reach each Result.
	plugins, err := profileplugins.New(pluginConfig)
	if err != nil {
		return fmt.Errorf("configuring profile-plugins: %w", err)
	}
	cacheOptions := profileplugins.CacheOptions(plugins...)
	mgr, err := ctrl.NewManager(profileplugins.WithWarnings(restConfig), ctrl.Options{
		Scheme:  scheme,
		Cache:   cacheOptions,
		Metrics: metricsserver.Options{BindAddress: o.metricsAddr},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	runner, err := profileplugins.NewRunner(mgr.GetClient(), pluginConfig, profileplugins.WithManager(mgr, cacheOptions))
	if err != nil {
		return fmt.Errorf("setting up profile-plugins: %w", err)
	}
	r := &ProfileReconciler{Client: mgr.GetClient(), Mesh: &kubeflow.Integration{Runner: runner, MaxWaitRequeue: kubeflow.DefaultMaxWaitRequeue}}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the reconciler: %w", err)
	}
	return mgr.Start(ctx)
}
