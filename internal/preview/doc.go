// Package preview builds the cluster state a preview assumes when it has no cluster to read:
// what istiod would have written by the time the plugins settle. `profile-plugins render` uses it
// for its steady-state output, and tests use it (through internal/fixture) for the same state.
//
// It imports no test package, so a program may link it.
package preview
