// Package profileplugins is the one import a Kubeflow profiles controller needs to make every user
// namespace work, and stay private, on Istio's ambient mesh (or with sidecars) and under Pod
// Security Standards.
//
// [New] returns the plugin set for an admin's [Config] (the access policies, the waypoint and Pod
// Security), [NewRunner] wraps it in the [Runner] that writes it, and [AddToScheme] registers the
// types the plugins emit. The names here are aliases of the packages that define them, in the way
// controller-runtime's root package gathers its most used names.
//
// # Getting started
//
// A fork of the profiles controller registers the types, builds the runner next to its manager,
// and calls it from its reconciler once the namespace and the finalizer exist:
//
//	utilruntime.Must(profileplugins.AddToScheme(scheme))
//	cfg, err := profileplugins.LoadConfig(path) // "": the documented defaults
//	plugins, err := profileplugins.New(cfg)
//	cacheOptions := profileplugins.CacheOptions(plugins...) // EndpointSlices keep the labels these read
//	mgr, err := ctrl.NewManager(profileplugins.WithWarnings(restConfig), ctrl.Options{Scheme: scheme, Cache: cacheOptions})
//	runner, err := profileplugins.NewRunner(mgr.GetClient(), cfg, profileplugins.WithManager(mgr, cacheOptions))
//	mesh := &profileplugins.Integration{Runner: runner}
//
//	// in Reconcile; mesh.Revoke likewise under the finalizer, before it is removed
//	if res, err := mesh.Apply(ctx, profile); err != nil || !res.IsZero() {
//		return res, err
//	}
//
// examples/fork is that wiring as a program, with a test. Then read
// [github.com/kubeflow-ambient/profile-plugins/kubeflow] for the watches and the Profile it takes,
// [github.com/kubeflow-ambient/profile-plugins/runner] for what is written when and what a
// [Result] says, [github.com/kubeflow-ambient/profile-plugins/config/v1alpha1] for the
// configuration, [github.com/kubeflow-ambient/profile-plugins/ownership] for which namespaces are a
// Profile's, and [github.com/kubeflow-ambient/profile-plugins/platform] for the check of the
// cluster around the user namespaces.
package profileplugins
