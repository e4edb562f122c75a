package platform

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// This file checks that istiod can start waypoint pods that Pod Security admits.

// supportedOverlays are the keys istiod accepts in a class-defaults ConfigMap; any other key
// makes it refuse to render the class's Gateways (supportedOverlays in
// pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go, Istio 1.30).
var supportedOverlays = []string{"deployment", "service", "serviceAccount", "horizontalPodAutoscaler", "podDisruptionBudget"}

// checkWaypoint reads the waypoint class defaults that istiod applies: only those in its own
// namespace, and of several only the oldest (deploymentcontroller.go, render:
// controllers.OldestObject, by creation time, then name).
func checkWaypoint(ctx context.Context, r client.Reader, cfg *config.Config) ([]Finding, error) {
	namespace, class := cfg.Mesh.IstiodNamespace, cfg.Mesh.Waypoint.ClassName
	list := &corev1.ConfigMapList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{waypoint.ClassDefaultsLabel: class}); err != nil {
		return nil, fmt.Errorf("listing the waypoint class defaults (ConfigMaps labelled %s=%s) in namespace %s (mesh.istiodNamespace): %w",
			waypoint.ClassDefaultsLabel, class, namespace, err)
	}
	var defaults *corev1.ConfigMap
	if len(list.Items) > 0 {
		oldest := slices.MinFunc(list.Items, olderFirst)
		defaults = &oldest
	}
	base := Finding{Kind: FindingWaypointCannotStart, What: WhatWaypoint, Namespace: namespace}
	if defaults != nil {
		base.ConfigMap = defaults.Name
		if f, bad := unsupportedKeys(base, defaults, class); bad {
			return []Finding{f}, nil
		}
	}
	if ptr.Deref(cfg.Mesh.Waypoint.SeccompPatch, false) || waypoint.SetsSeccompDefault(defaults) {
		return nil, nil
	}
	missing := fmt.Sprintf("mesh.waypoint.seccompPatch is off, and no ConfigMap in namespace %s is labelled %s=%s",
		namespace, waypoint.ClassDefaultsLabel, class)
	if defaults != nil {
		missing = "mesh.waypoint.seccompPatch is off, and the class defaults (the oldest labelled ConfigMap, the one istiod applies) " +
			"set no pod seccompProfile that restricted admits (or their deployment key does not parse)"
	}
	f := base
	f.Fix = fmt.Sprintf("apply the class-defaults ConfigMap that `render -cluster` emits into namespace %s, or set mesh.waypoint.seccompPatch: true", namespace)
	if level := cfg.PodSecurity.Enforce.Level; level != psaapi.LevelRestricted {
		// A Profile may always choose a stricter enforce level (pss), and a stricter level another
		// writer set is kept, so some namespace may be restricted whatever the configured level.
		f.Kind = FindingWaypointCannotStartIfRestricted
		f.Problem = fmt.Sprintf("enforce is %s, but any Profile may choose restricted (and a stricter enforce label set by another writer is kept), and %s: "+
			"in each such namespace Pod Security rejects the waypoint's pods, so it is never Programmed and the namespace waits for it forever", level, missing)
		return []Finding{f}, nil
	}
	f.Problem = "enforce is restricted, " + missing +
		": Pod Security rejects the waypoint's pods, so it is never Programmed and every user namespace waits for it forever"
	return []Finding{f}, nil
}

func olderFirst(a, b corev1.ConfigMap) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func unsupportedKeys(f Finding, cm *corev1.ConfigMap, class string) (Finding, bool) {
	var bad []string
	for k := range cm.Data {
		if !slices.Contains(supportedOverlays, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return f, false
	}
	slices.Sort(bad)
	f.Problem = fmt.Sprintf("the class defaults have key(s) %q, which istiod does not support, so it renders no waypoint of class %s", bad, class)
	f.Fix = fmt.Sprintf("keep only the keys %s in ConfigMap %s/%s", strings.Join(supportedOverlays, ", "), cm.Namespace, cm.Name)
	return f, true
}
