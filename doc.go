// Package profileplugins is the one import a Kubeflow profiles controller needs to make every user
// namespace work, and stay private, on Istio's ambient mesh (or with sidecars) and under Pod
// Security Standards.
//
// [New] returns the plugin set for an admin's [Config] (the waypoint, the access policies and Pod
// Security), [NewRunner] wraps it in the [Runner] that writes it, and [AddToScheme] registers the
// types the plugins emit. The profiles controller's own reconciler hands its Profile to
// [github.com/kubeflow-ambient/profile-plugins/kubeflow], which maps the runner's
// [Result] onto a controller-runtime result.
//
// The names here are aliases of the packages that define them (plugin, plugin/config), in the
// way controller-runtime's root package gathers its most used names.
package profileplugins
