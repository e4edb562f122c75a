// Package platform checks the cluster around the user namespaces for what the plugins cannot fix
// from inside them: a platform caller or ingress gateway that runs on another data plane than the
// configuration says (its calls are then denied), a trusted namespace that is a user's (whose owner
// could then act as a trusted caller), an L4 exception whose ipBlocks hold a forwarder's pod, and
// waypoint pods that Pod Security would refuse (the namespaces then wait forever).
//
// [Check] only reads: a few Namespaces, the Pods of the trusted service accounts and the waypoint
// class defaults. A controller runs it at start and now and then, and logs or counts the
// [Finding]s of its [Report] by [FindingKind]; each finding says what is wrong and how to fix it.
// Pass a reader that goes to the API server (a manager's APIReader), not a cache.
package platform
