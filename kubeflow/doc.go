// Package kubeflow connects the plugins to the Kubeflow profiles controller's reconciler.
//
// A fork of the controller keeps its own Profile type and calls [Integration.Apply] once the
// namespace exists and the finalizer is in place, and [Integration.Revoke] under its finalizer;
// both take the controller's Profile as a client.Object and return what Reconcile should return
// (one mapping, [Outcome]); [Integration.AfterApply] is where it writes the Result's condition to
// the Profile's status. Its watches map kfam's RoleBindings with [EnqueueProfileOfNamespace] and
// Namespaces with [EnqueueProfileOfSameName], in place of Owns(&corev1.Namespace{}), which misses a
// namespace handed over by its owner annotation. cmd/profile-plugins-controller is built the same
// way. The README's "Wire it into the profiles controller" shows the complete patch, and a test of
// this module compiles that text against a stand-in of the controller. Its manager caches only the
// ConfigMaps the plugins made and no Pods (given the plugins, EndpointSlices keep only the labels
// they read; see runner.CacheByObject):
//
//	cacheOptions := profileplugins.CacheOptions()
//	mgr, err := ctrl.NewManager(profileplugins.WithWarnings(ctrl.GetConfigOrDie()), ctrl.Options{
//		Cache: cacheOptions,
//		// the controller's own options
//	})
//	// reads past the cache: wanted names of the kinds it selects, pods when needed
//	runner, err := profileplugins.NewRunner(mgr.GetClient(), pluginConfig,
//		profileplugins.WithManager(mgr, cacheOptions))
//
// The Runner's Reader, APIReader and FullyCached fields say what each must show.
package kubeflow
