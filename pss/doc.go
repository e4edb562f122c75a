// Package pss is the Pod Security plugin: it sets the pod-security.kubernetes.io labels of every
// user namespace to what the platform admin decided, and lets a Profile choose only within that.
//
// The admin's configuration gives the enforce, audit and warn levels and versions (default:
// enforce baseline, audit and warn restricted, all at latest). A Profile may carry a
// spec.plugins entry of kind PodSecurity:
//
//	plugins:
//	- kind: PodSecurity
//	  spec: {enforce: restricted}
//
// Anyone may tighten a level (to restricted in ambient mode too: the waypoint class defaults give
// the waypoint pod the seccompProfile restricted needs). Loosening enforce is allowed only to profiles whose
// namespace's labels an override in the configuration selects (never by the Profile's name, which
// the user chose), and only down to that override's
// minimum; audit and warn never loosen, since they are how the admin sees violations. A refused
// request is not applied: the namespace keeps the admin's level and the Result carries an error
// that names the profile, the field and the refused level.
//
// Before enforce is tightened on a namespace, the plugin evaluates its running pods with the API
// server's own Pod Security checks (k8s.io/pod-security-admission/policy) and reports every pod that
// would violate the new level. Tightening still goes ahead by default, as the API server allows
// (existing pods keep running; new ones are refused); with podSecurity.preflight: hold the
// plugin keeps the current enforce level and waits until the pods comply. Hold keeps an existing
// level only: a namespace with no enforce label (which means privileged) gets the configured level
// at once, and the violating pods are reported as warnings. A runner that lists pods only when a
// decision needs them (runner.Runner.APIReader) lists them for hold alone: otherwise the report is
// a warning, and the API server gives it itself when the stricter label is written.
//
// The configured level is a floor. When another writer (a GitOps tool, an admin's kubectl) holds a
// stricter level on the namespace, for any mode, or the same level at a newer version, the plugin
// keeps it, writes that same value so it co-owns the label (and the label survives that writer
// withdrawing it), and warns with the writer's field manager, from plugin.Observed.LabelManagers.
// A level the plugin alone holds follows the configuration, down as well as up. Every mode is
// always labelled: the plugin never removes a Pod Security label, and neither does the runner's
// Revoke (the plugin is a plugin.AdmissionGuard): a namespace that outlives its Profile keeps them
// for whoever its surviving RoleBindings name, and one that goes away keeps them until it is gone.
package pss
