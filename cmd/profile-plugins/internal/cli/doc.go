// Package cli holds what the subcommands of profile-plugins share: exit statuses, flag parsing
// with kubectl-style help and errors, the -o output formats, kubeconfig loading, and the
// configuration flags of the commands that read a PluginConfig.
//
// It links no test package: everything under cmd/ builds into a program.
package cli
