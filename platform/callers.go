package platform

import (
	"fmt"
	"slices"

	"istio.io/api/annotation"
	"istio.io/api/label"
	corev1 "k8s.io/api/core/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// This file judges what the platform callers and the ingress gateway run as: their namespace, their
// pods and the data plane those pods are on.

// judgeTrusted gives the findings about one caller's or the ingress gateway's own pods.
func judgeTrusted(mode config.MeshMode, t trustedPrincipal) []Finding {
	if t.caller == nil {
		return judgeIngressGateway(t)
	}
	base := Finding{What: t.caller.Name, Namespace: t.namespace, Principal: t.principal}
	if t.ns == nil {
		f := base
		f.Kind = FindingCallerNamespaceMissing
		f.Problem = fmt.Sprintf("namespace %s does not exist: the caller is not installed, or its principal names the wrong namespace, so the owner policy's rule for it never matches", t.namespace)
		f.Fix = fmt.Sprintf("correct %s, or remove the caller from authorization.platformCallers if it is not installed", t.path)
		return []Finding{f}
	}
	var out []Finding
	for _, o := range observePlanes(t.ns, t.pods, t.sa) {
		if f, ok := judgeCaller(base, mode, *t.caller, o); ok {
			out = append(out, f)
		}
	}
	return out
}

// dataPlane is what the cluster runs for a pod or, without pods, what a namespace's labels ask for.
type dataPlane string

const (
	planeAmbient dataPlane = dataPlane(config.CallerAmbient)
	planeSidecar dataPlane = dataPlane(config.CallerSidecar)
	planeNone    dataPlane = "none"
)

// podDataPlane classifies a pod as the Istio CNI agent does: a pod with a sidecar is never
// captured by ztunnel (cni/pkg/util/podutil.go podHasSidecar, on sidecar.istio.io/status, called
// first by the enablement selector), and a captured pod carries ambient.istio.io/redirection:
// enabled, which istiod needs to send it HBONE (pilot/pkg/serviceregistry/ambient/workloads.go).
func podDataPlane(pod *corev1.Pod) dataPlane {
	switch {
	case pod.Annotations[annotation.SidecarStatus.Name] != "":
		return planeSidecar
	case pod.Annotations[annotation.AmbientRedirection.Name] == "enabled":
		return planeAmbient
	}
	return planeNone
}

// namespaceDataPlane is what a namespace's labels ask for. Injection wins over ambient because
// a pod with a sidecar is never captured by ztunnel (see podDataPlane).
func namespaceDataPlane(ns *corev1.Namespace) dataPlane {
	injection := ns.Labels[waypoint.InjectionLabel]
	switch {
	case injection == "enabled", injection != "disabled" && ns.Labels[label.IoIstioRev.Name] != "":
		return planeSidecar
	case ns.Labels[label.IoIstioDataplaneMode.Name] == "ambient":
		return planeAmbient
	}
	return planeNone
}

// observation is one data plane a caller runs on, and where that was seen.
type observation struct {
	plane dataPlane
	// evidence says which pods (or that the namespace's labels) show it.
	evidence string
}

// observePlanes groups the pods by data plane, in a fixed order; without pods it reads the
// namespace's labels, and says so.
func observePlanes(ns *corev1.Namespace, pods []corev1.Pod, sa string) []observation {
	if len(pods) == 0 {
		return []observation{{plane: namespaceDataPlane(ns),
			evidence: fmt.Sprintf("no pod runs as ServiceAccount %s, so this is read from the labels of namespace %s", sa, ns.Name)}}
	}
	byPlane := map[dataPlane][]string{}
	for i := range pods {
		p := podDataPlane(&pods[i])
		byPlane[p] = append(byPlane[p], pods[i].Name)
	}
	var out []observation
	for _, p := range []dataPlane{planeAmbient, planeSidecar, planeNone} {
		names := byPlane[p]
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		out = append(out, observation{plane: p, evidence: fmt.Sprintf("%d of %d pod(s), e.g. %s", len(names), len(pods), names[0])})
	}
	return out
}

// judgeCaller decides whether one observed data plane of a caller is a finding. The configured
// data plane matters only in ambient mode: with sidecars in the user namespaces, the owner
// policy runs in each pod's sidecar and sees the caller's identity from either data plane.
func judgeCaller(f Finding, mode config.MeshMode, caller config.PlatformCaller, o observation) (Finding, bool) {
	configured := dataPlane(caller.DataPlane)
	if configured == "" {
		configured = planeAmbient
	}
	switch {
	case o.plane == planeNone:
		f.Kind = FindingCallerNotInMesh
		f.Problem = fmt.Sprintf("runs outside the mesh (%s): its calls carry no identity, so every user namespace denies them", o.evidence)
		f.Fix = fmt.Sprintf("enrol namespace %s: label it %s=ambient (dataPlane: ambient) or %s=enabled (dataPlane: sidecar), then restart the caller's pods",
			f.Namespace, label.IoIstioDataplaneMode.Name, waypoint.InjectionLabel)
	case mode != config.ModeAmbient || o.plane == configured:
		return f, false
	case o.plane == planeSidecar:
		// Sidecars never send through a waypoint (pilot/pkg/xds/endpoints/endpoint_builder.go,
		// findServiceWaypoint is for gateways only): their calls reach the pod's ztunnel directly.
		f.Kind = FindingDataPlaneMismatch
		f.Problem = fmt.Sprintf("configured dataPlane ambient, but runs with a sidecar (%s): its calls skip the waypoint, and the ztunnel policy denies them", o.evidence)
		f.Fix = fmt.Sprintf("set dataPlane: sidecar for %s (the ztunnel policy then admits it at L4, without its L7 limits), or move namespace %s to ambient and restart the caller's pods",
			caller.Name, f.Namespace)
	default:
		f.Kind = FindingDataPlaneMismatch
		f.Problem = fmt.Sprintf("configured dataPlane sidecar, but runs in ambient (%s): the ztunnel policy admits it to every port and path of every pod, more than its rule at the waypoint allows", o.evidence)
		f.Fix = fmt.Sprintf("set dataPlane: ambient for %s", caller.Name)
	}
	return f, true
}

func judgeIngressGateway(t trustedPrincipal) []Finding {
	if t.ns != nil && len(t.pods) > 0 {
		return nil
	}
	problem := fmt.Sprintf("namespace %s does not exist", t.namespace)
	if t.ns != nil {
		problem = fmt.Sprintf("no pod in namespace %s runs as ServiceAccount %s", t.namespace, t.sa)
	}
	return []Finding{{
		Kind: FindingIngressGatewayMissing, What: WhatIngressGateway, Namespace: t.namespace, Principal: t.principal,
		Problem: problem + ": the owner policy admits users only through this principal, so no user reaches their namespace",
		Fix:     fmt.Sprintf("set %s to the principal of the ingress gateway's pods (their namespace and ServiceAccount)", t.path),
	}}
}
