// Package clutter makes the foreign objects a busy Kubeflow namespace holds, which the plugins
// neither own nor need: notebook and pipeline Pods with full specs, ConfigMaps with a few KB of
// data, kfam's RoleBindings, Secrets, the profiles controller's ServiceAccounts and the notebooks'
// EndpointSlices. The scale benchmark puts them in every namespace, so a process that caches other
// people's objects pays for them in memory, as it would on a real cluster.
package clutter
