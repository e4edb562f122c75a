// Command profile-plugins previews and checks what the profile plugins do, with subcommands in
// the manner of kubectl and istioctl:
//
//	profile-plugins render   # what the plugins emit for one Profile, as YAML; no cluster needed
//	profile-plugins plan     # a rollout against a live cluster, every write a server-side dry run
//	profile-plugins check    # the platform check against a cluster, read-only
//	profile-plugins convert  # selector AuthorizationPolicies into their ambient (targetRefs) form
//	profile-plugins version
//
// Each answers --help (or -h) with its flags, examples and exit statuses. Every subcommand is a
// package under internal/ exposing Run(ctx, args, stdout, stderr) int (convert also takes stdin),
// so tests run it in-process; this package only dispatches. Nothing here links a test package
// (main_test.go checks it with go list).
package main
