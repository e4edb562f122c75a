package platform

import (
	"fmt"
	"strings"
)

// FindingKind says what a platform finding is about; controllers count findings by kind.
type FindingKind string

const (
	// FindingDataPlaneMismatch: a platform caller runs on another data plane than configured.
	FindingDataPlaneMismatch FindingKind = "DataPlaneMismatch"
	// FindingCallerNotInMesh: a platform caller's pods are in no mesh, so they carry no identity.
	FindingCallerNotInMesh FindingKind = "CallerNotInMesh"
	// FindingCallerNamespaceMissing: the namespace of a platform caller's principal does not exist.
	FindingCallerNamespaceMissing FindingKind = "CallerNamespaceMissing"
	// FindingIngressGatewayMissing: no pod runs as the configured ingress gateway principal.
	FindingIngressGatewayMissing FindingKind = "IngressGatewayMissing"
	// FindingWaypointCannotStart: istiod cannot make waypoint pods that the cluster admits.
	FindingWaypointCannotStart FindingKind = "WaypointCannotStart"
	// FindingWaypointCannotStartIfRestricted is the lower-severity form of WaypointCannotStart:
	// the configured enforce level admits the waypoint's pods, but a namespace whose Profile
	// chooses "restricted" (always allowed) would refuse them and wait forever.
	FindingWaypointCannotStartIfRestricted FindingKind = "WaypointCannotStartIfRestricted"
	// FindingTrustedNamespaceUserControlled: the namespace of a principal every user namespace
	// trusts (a platform caller, the ingress gateway, an L4 exception) is a user's: a Profile
	// controls it, it carries the owner annotation of one, or the plugins have labelled it.
	FindingTrustedNamespaceUserControlled FindingKind = "TrustedNamespaceUserControlled"
	// FindingIPBlockCoversForwarder: an L4 exception's ipBlocks entry holds a pod IP of the
	// ingress gateway or of an onBehalfOfUser platform caller, which then reaches user pods
	// without the user-id check.
	FindingIPBlockCoversForwarder FindingKind = "IPBlockCoversForwarder"
	// FindingIdleAfterShorterThanStart: with mesh.waypoint.provision onDemand, a waypoint of the
	// cluster took longer than mesh.waypoint.idleAfter to become Programmed.
	FindingIdleAfterShorterThanStart FindingKind = "IdleAfterShorterThanStart"
	// FindingGuardMissing: a policy of the admission guard (package guard) does not exist, or the
	// cluster serves no ValidatingAdmissionPolicies.
	FindingGuardMissing FindingKind = "GuardMissing"
	// FindingGuardUnbound: a policy of the guard exists, but no binding that denies binds it.
	FindingGuardUnbound FindingKind = "GuardUnbound"
	// FindingGuardMisbound: a policy of the guard is bound to fewer namespaces than the managed
	// ones, or recognises them by something else than the owner annotation.
	FindingGuardMisbound FindingKind = "GuardMisbound"
	// FindingGuardStale: a policy of the guard differs from the one the running PluginConfig
	// renders (its validations, variables, match conditions, resource rules or failure policy):
	// it was rendered from another configuration, such as another mesh.mode, or version.
	FindingGuardStale FindingKind = "GuardStale"
	// FindingWaypointDefaultDenyMissing: the root namespace has no default deny for the waypoint
	// class, or one that differs from it.
	FindingWaypointDefaultDenyMissing FindingKind = "WaypointDefaultDenyMissing"
	// FindingMeshConfigInUserNamespace: mesh configuration the guard refuses in user namespaces
	// (an EnvoyFilter, a Gateway other than the waypoint, ...) exists in one, unless
	// guard.meshConfigAllowed names it.
	FindingMeshConfigInUserNamespace FindingKind = "MeshConfigInUserNamespace"
	// FindingWaypointIdentityShared: in a managed namespace, something other than istiod's
	// waypoint runs as its ServiceAccount, passes as its pods, holds a token for it or would give
	// a pod its identity (made before the guard was installed, or by its break-glass group).
	FindingWaypointIdentityShared FindingKind = "WaypointIdentityShared"
	// FindingMeshServiceAccountNotRunning: no pod runs as an entry of guard.meshServiceAccounts,
	// so the guard would refuse istiod's writes to waypoints if istiod runs as another (a revision
	// tag in mesh.revision makes the default name one no istiod has).
	FindingMeshServiceAccountNotRunning FindingKind = "MeshServiceAccountNotRunning"
)

// FindingKinds returns every kind, so that a metric can report zero for the absent ones.
func FindingKinds() []FindingKind {
	return []FindingKind{FindingDataPlaneMismatch, FindingCallerNotInMesh, FindingCallerNamespaceMissing,
		FindingIngressGatewayMissing, FindingWaypointCannotStart, FindingWaypointCannotStartIfRestricted,
		FindingTrustedNamespaceUserControlled, FindingIPBlockCoversForwarder, FindingIdleAfterShorterThanStart,
		FindingGuardMissing, FindingGuardUnbound, FindingGuardMisbound, FindingGuardStale, FindingWaypointDefaultDenyMissing, FindingMeshConfigInUserNamespace,
		FindingWaypointIdentityShared, FindingMeshServiceAccountNotRunning}
}

// What names the ingress gateway, the waypoint and an L4 exception in a Finding
// (callers go by their name).
const (
	WhatIngressGateway = "ingress-gateway"
	WhatWaypoint       = "waypoint"
	WhatL4Exception    = "l4-exception"
)

// Finding is one thing about the platform that breaks user namespaces, and its fix.
type Finding struct {
	Kind FindingKind `json:"kind"`
	// What is the platform caller's name, WhatIngressGateway or WhatWaypoint.
	What string `json:"what"`
	// Namespace is where the subject lives: the caller's or the gateway's namespace, or istiod's
	// for the waypoint's class defaults.
	Namespace string `json:"namespace"`
	// Principal is the caller's or the gateway's SPIFFE principal, when there is one.
	Principal string `json:"principal,omitempty"`
	// ConfigMap names the class-defaults ConfigMap (in Namespace) the finding is about, if any.
	ConfigMap string `json:"configMap,omitempty"`
	// Policy names the guard's ValidatingAdmissionPolicy, or the default deny, the finding is about.
	Policy  string `json:"policy,omitempty"`
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// Subject says what the finding is about, in words.
func (f Finding) Subject() string {
	var parts []string
	if f.Namespace != "" {
		parts = append(parts, "namespace "+f.Namespace)
	}
	if f.Policy != "" {
		parts = append(parts, "policy "+f.Policy)
	}
	if f.Principal != "" {
		parts = append(parts, "principal "+f.Principal)
	}
	if f.ConfigMap != "" {
		parts = append(parts, "ConfigMap "+f.ConfigMap)
	}
	return strings.Join(parts, ", ")
}

// String is the finding on one line, for a log or an event.
func (f Finding) String() string {
	return fmt.Sprintf("%s: %s (%s): %s; fix: %s", f.Kind, f.What, f.Subject(), f.Problem, f.Fix)
}

// Report is what Check found; no findings means nothing it checks is broken.
type Report struct {
	Findings []Finding `json:"findings"`
	// NotChecked says what the reader was not allowed to read, and so was not checked.
	NotChecked []string `json:"notChecked,omitempty"`
}

// String is the report, one finding a line.
func (r Report) String() string {
	lines := []string{"platform check: no findings"}
	if len(r.Findings) > 0 {
		lines = []string{fmt.Sprintf("platform check: %d finding(s)", len(r.Findings))}
	}
	for _, f := range r.Findings {
		lines = append(lines, "  "+f.String())
	}
	for _, n := range r.NotChecked {
		lines = append(lines, "  not checked: "+n)
	}
	return strings.Join(lines, "\n")
}
