package platform

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

// Check reads the cluster through r and reports what keeps the plugins' output from
// working, or from keeping user namespaces private, in the namespaces around them:
//
//   - each platform caller (authorization.platformCallers) whose pods run on another data plane
//     than its dataPlane says, or on none, or whose namespace does not exist;
//   - an ingress gateway principal that no pod runs as;
//   - the namespace of a platform caller, of the ingress gateway or of an L4 exception (by
//     namespace, principal or service account) that is a user's: a Profile controls it, it has the
//     Profile's "owner" annotation (when namespaces.ownership accepts that), or the plugins have
//     written its labels. The runner refuses such a Profile (the namespace is reserved), but the
//     Profile's owner keeps the namespace and can run pods as the trusted principal;
//   - in ambient mode, an L4 exception's ipBlocks entry that holds a pod IP of the ingress gateway
//     or of an onBehalfOfUser caller, and waypoint pods that Pod Security or istiod would refuse
//     (under the configured enforce level, or under "restricted", which any Profile may choose),
//     and a missing or changed default deny for the waypoint class in the root namespace;
//   - in every mode, the admission guard (package guard) missing, unbound, bound to fewer
//     namespaces than the managed ones, or rendered from another configuration;
//   - with mesh.waypoint.provision onDemand, a waypoint of the plugins' that took longer than
//     mesh.waypoint.idleAfter to become Programmed (a cluster-wide List of their Gateways);
//   - in sidecar and ambient mode, an entry of guard.meshServiceAccounts that no live pod runs as
//     (the guard would refuse istiod's writes to waypoints);
//   - in sidecar and ambient mode, whatever in a managed namespace could run as the waypoint or
//     pass as its pods without being istiod's waypoint (platform/waypointidentity.go), made before
//     the guard was installed or by its break-glass group; token Secrets only where r may list
//     Secrets (as metadata), else the report says they were not checked.
//
// In mode none only the guard is checked. It only reads, and only in those namespaces (and those
// of guard.meshServiceAccounts): a Get of each Namespace, and Lists of Pods (with the field selector spec.serviceAccountName) and of ConfigMaps
// (with the class-defaults label); and cluster-wide, a Get of each guard policy and of the default
// deny, a List of ValidatingAdmissionPolicyBindings, and Lists of the Namespaces and of the mesh
// configuration the guard refuses in user namespaces (platform/meshconfig.go); for the waypoint's
// identity, Lists of Pods (selected by ServiceAccount and by label), of Deployments and
// ReplicaSets as metadata (a Get of those named like the waypoint's), of PodDefaults and token
// Secrets (metadata), and Gets of each managed namespace's waypoint ServiceAccount. r should read the API server directly (a manager's
// APIReader): a cache would need an index on spec.serviceAccountName and would hold every Pod of
// the cluster.
func Check(ctx context.Context, r client.Reader, cfg *config.Config) (Report, error) {
	var report Report
	if cfg.Mesh.Mode != config.ModeNone {
		if err := checkMesh(ctx, r, cfg, &report); err != nil {
			return report, err
		}
	}
	// The guard protects the Pod Security labels in every mode.
	g, err := checkGuard(ctx, r, cfg)
	if err != nil {
		return report, err
	}
	report.Findings = append(report.Findings, g...)
	return report, nil
}

// checkMesh is what Check reads and judges in sidecar and ambient mode.
func checkMesh(ctx context.Context, r client.Reader, cfg *config.Config, report *Report) error {
	trusted, err := readTrusted(ctx, r, cfg)
	if err != nil {
		return err
	}
	for _, s := range trusted {
		report.Findings = append(report.Findings, judgeTrusted(cfg.Mesh.Mode, s)...)
	}
	exceptions, err := readExceptionNamespaces(ctx, r, cfg.Authorization.L4Exceptions)
	if err != nil {
		return err
	}
	// Reserved names do not matter here: reserving a namespace does not take it from its user.
	rule := ownership.Policy{RequireOwnerReference: cfg.Namespaces.Ownership == config.OwnershipReference}
	report.Findings = append(report.Findings, userControlled(rule, trusted, exceptions)...)
	if cfg.Mesh.Mode == config.ModeAmbient {
		report.Findings = append(report.Findings, ipBlocksCoveringForwarders(cfg.Authorization.L4Exceptions, trusted)...)
		f, err := checkWaypoint(ctx, r, cfg)
		if err != nil {
			return err
		}
		report.Findings = append(report.Findings, f...)
		if f, err = checkDefaultDeny(ctx, r, cfg); err != nil {
			return err
		}
		report.Findings = append(report.Findings, f...)
		if f, err = checkIdleAfter(ctx, r, cfg); err != nil {
			return err
		}
		report.Findings = append(report.Findings, f...)
	}
	f, err := checkMeshConfig(ctx, r, cfg)
	if err != nil {
		return err
	}
	report.Findings = append(report.Findings, f...)
	if f, err = checkMeshServiceAccounts(ctx, r, cfg); err != nil {
		return err
	}
	report.Findings = append(report.Findings, f...)
	// In sidecar mode too: a switch to ambient would put them in force.
	f, notChecked, err := checkWaypointIdentity(ctx, r, cfg)
	if err != nil {
		return err
	}
	report.Findings = append(report.Findings, f...)
	report.NotChecked = append(report.NotChecked, notChecked...)
	return nil
}

// trustedPrincipal is a principal every user namespace admits (a platform caller or the ingress
// gateway), with what the cluster has of it.
type trustedPrincipal struct {
	// caller is nil for the ingress gateway.
	caller    *config.PlatformCaller
	path      string // the field path of the principal
	principal string
	namespace string
	sa        string
	// ns is nil when the namespace does not exist; pods are the live ones running as sa.
	ns   *corev1.Namespace
	pods []corev1.Pod
}

// what names the principal in a finding.
func (t trustedPrincipal) what() string {
	if t.caller == nil {
		return WhatIngressGateway
	}
	return t.caller.Name
}

// forwardsForUsers says whether the principal sends requests on behalf of any user, which the
// policies admit only with the user-id header, checked at the waypoint.
func (t trustedPrincipal) forwardsForUsers() bool { return t.caller == nil || t.caller.OnBehalfOfUser }

// readTrusted reads every platform caller's and then the ingress gateway's namespace and pods.
func readTrusted(ctx context.Context, r client.Reader, cfg *config.Config) ([]trustedPrincipal, error) {
	var out []trustedPrincipal
	for i := range cfg.Authorization.PlatformCallers {
		caller := &cfg.Authorization.PlatformCallers[i]
		t, err := readPrincipal(ctx, r, "platform caller "+caller.Name, fmt.Sprintf("authorization.platformCallers[%d].principal", i), caller.Principal)
		if err != nil {
			return nil, err
		}
		t.caller = caller
		out = append(out, t)
	}
	t, err := readPrincipal(ctx, r, "ingress gateway", "authorization.principals.ingressGateway", cfg.Authorization.Principals.IngressGateway)
	if err != nil {
		return nil, err
	}
	return append(out, t), nil
}

// readPrincipal reads the namespace and pods of principal; a malformed principal is an error
// that names path, a read error is wrapped with who names the principal.
func readPrincipal(ctx context.Context, r client.Reader, who, path, principal string) (trustedPrincipal, error) {
	t := trustedPrincipal{path: path, principal: principal}
	_, namespace, sa, err := config.ParsePrincipal(principal)
	if err != nil {
		return t, fmt.Errorf("%s %w", path, err)
	}
	t.namespace, t.sa = namespace, sa
	if t.ns, t.pods, err = serviceAccountPods(ctx, r, namespace, sa); err != nil {
		return t, fmt.Errorf("%s (%s): %w", who, path, err)
	}
	return t, nil
}

// serviceAccountPods reads the namespace and its live pods that run as sa; ns is nil when the
// namespace does not exist.
func serviceAccountPods(ctx context.Context, r client.Reader, namespace, sa string) (*corev1.Namespace, []corev1.Pod, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, ns); apierrors.IsNotFound(err) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("reading Namespace %s: %w", namespace, err)
	}
	// The API server selects pods by spec.serviceAccountName (pkg/registry/core/pod/strategy.go,
	// ToSelectableFields), so only the caller's pods cross the wire.
	list := &corev1.PodList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{"spec.serviceAccountName": sa}); err != nil {
		return nil, nil, fmt.Errorf("listing Pods of ServiceAccount %s in namespace %s: %w", sa, namespace, err)
	}
	live := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	return ns, live, nil
}
