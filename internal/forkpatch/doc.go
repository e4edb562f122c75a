// Package forkpatch proves the README's fork patch: its test takes the Go blocks the README marks
// with <!-- forkpatch:NAME --> and compiles them, exactly as written, into a stand-in of the
// profiles controller (kubeflow/dashboard components/profile-controller: its ProfileReconciler,
// Plugin interface, Reconcile's finalizer branches, SetupWithManager and main.go), next to a
// Profile type of its own registered for kubeflow.org/v1.
package forkpatch
