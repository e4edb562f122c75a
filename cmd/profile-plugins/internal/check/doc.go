// Package check is `profile-plugins check`: the platform check (platform.Check) on its own,
// against the cluster of a kubeconfig, read-only. It prints what in the namespaces around the
// user namespaces keeps the plugins' output from working or from keeping them private, with the
// fix of each, and says by its exit status whether anything was found.
package check
