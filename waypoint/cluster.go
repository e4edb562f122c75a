package waypoint

import (
	"fmt"

	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// ClusterDefaultDenyName names the mesh-wide allow-nothing policy for waypoints.
const ClusterDefaultDenyName = "waypoint-default-deny"

// attachableClass is the only GatewayClass a root-namespace policy can target: istiod attaches
// a GatewayClass-targeted policy only when it sits in the root namespace and names this class; the
// name is hard-coded there (istio/istio pilot/pkg/model/policyattachment.go, since Istio 1.25,
// istio/istio#54780). Any other class name is accepted by the API server and then silently ignored.
const attachableClass = config.DefaultWaypointClassName

// ClusterDefaultDeny is an allow-nothing policy in Istio's root namespace that targets the
// istio-waypoint GatewayClass, so every waypoint denies what no policy of its own allows
// (istio/istio#54696). It is cluster-wide, not per namespace: apply it once, before any user
// namespace is enrolled. With another waypoint class it returns an error, because istiod would
// ignore the policy and the admin would believe in a default-deny that does not exist.
func ClusterDefaultDeny(cfg *config.Config) (*istiosecurityv1.AuthorizationPolicy, error) {
	if class := cfg.Mesh.Waypoint.ClassName; class != attachableClass {
		return nil, fmt.Errorf("mesh.waypoint.className %q: istiod attaches a policy that targets a GatewayClass only for class %q, "+
			"a name hard-coded in istiod (pilot/pkg/model/policyattachment.go), and only from the root namespace %q, "+
			"so a cluster-wide default-deny for class %q would be silently ignored; "+
			"the per-namespace ztunnel policy still keeps each namespace closed, but a waypoint without its own policy would allow everything "+
			"it is sent: use class %q, or give every waypoint of your class an allow-nothing policy of its own",
			class, attachableClass, cfg.Mesh.RootNamespace, class, attachableClass)
	}
	return &istiosecurityv1.AuthorizationPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: istiosecurityv1.SchemeGroupVersion.String(), Kind: "AuthorizationPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      ClusterDefaultDenyName,
			Namespace: cfg.Mesh.RootNamespace,
			Labels:    map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: PluginName},
		},
		Spec: securityv1beta1.AuthorizationPolicy{
			// An ALLOW policy with no rules allows nothing.
			Action: securityv1beta1.AuthorizationPolicy_ALLOW,
			TargetRefs: []*typev1beta1.PolicyTargetReference{{
				Group: gatewayv1.GroupName,
				Kind:  "GatewayClass",
				Name:  attachableClass,
			}},
		},
	}, nil
}

// ClassDefaultsName names the plugins' waypoint class defaults ConfigMap. Istio's Helm chart
// names its own istio-<rev>-gatewayclass-<class> (istio/istio manifests/charts/istio-control/
// istio-discovery/templates/gateway-class-configmap.yaml, from the gatewayClasses Helm value), so
// the two never collide by name and this one says who wrote it.
const ClassDefaultsName = "profile-plugins-waypoint-class-defaults"

// ClassDefaults is the waypoint class defaults ConfigMap: the seccomp patch and the sizing
// (mesh.waypoint resources, replicas, autoscaling, podDisruptionBudget; see sizingOverlays), in istiod's own
// namespace (mesh.istiodNamespace), labelled gateway.istio.io/defaults-for-class with the waypoint
// class. istiod applies its "deployment" key as a strategic merge patch to every waypoint
// Deployment of that class, before the Gateway's own parametersRef, so every waypoint pod gets
// seccompProfile RuntimeDefault and passes Pod Security "restricted" without a ConfigMap in the
// user namespace, where namespace editors could rewrite it. Only admins write istiod's namespace.
// istiod reads class defaults from Istio 1.26.0 on (istio/istio PR #55283; in 1.30 the reader is
// pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go, render, which lists ConfigMaps in
// its own POD_NAMESPACE, never the mesh root namespace). Apply it once, like ClusterDefaultDeny.
//
// istiod uses exactly one class defaults ConfigMap per class: when several match (Istio's Helm
// chart renders one too when its gatewayClasses value names istio-waypoint), the oldest wins
// (controllers.OldestObject in the same file) and the others are ignored as a whole, this one
// included. Then put the patch into that one instead; [SetsSeccompDefault] tells whether it has it.
func ClassDefaults(cfg *config.Config) (*corev1.ConfigMap, error) {
	ns := cfg.Mesh.IstiodNamespace
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return nil, fmt.Errorf("mesh.istiodNamespace %q: %s", ns, msgs[0])
	}
	data, err := sizingOverlays(cfg.Mesh.Waypoint.WaypointSizing, cfg.Mesh.Waypoint.ClassName, classLayer)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      ClassDefaultsName,
			Namespace: ns,
			Labels: map[string]string{
				ClassDefaultsLabel:    cfg.Mesh.Waypoint.ClassName,
				plugin.ManagedByLabel: plugin.ManagedByValue,
				plugin.PluginLabel:    PluginName,
			},
		},
		Data: data,
	}, nil
}

// deploymentOverlay is the ConfigMap key istiod applies to the Deployment it generates for a
// Gateway (one of deployment, service, serviceAccount, horizontalPodAutoscaler and
// podDisruptionBudget; any other key fails the render: supportedOverlays in
// pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go).
const deploymentOverlay = "deployment"

// SetsSeccompDefault reports whether a class defaults (or parametersRef) ConfigMap gives the
// waypoint pod a seccompProfile that Pod Security "restricted" admits: its "deployment" patch sets
// the pod's seccompProfile to RuntimeDefault (or Localhost) and sets no container's to
// Unconfined. It reads the content only; which ConfigMap istiod uses (the oldest one labelled for
// the class, in istiod's namespace) is the caller's to decide. A patch that does not parse sets
// nothing: istiod would fail to render the waypoint with it.
func SetsSeccompDefault(cm *corev1.ConfigMap) bool {
	if cm == nil {
		return false
	}
	patch, ok := cm.Data[deploymentOverlay]
	if !ok {
		return false
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(patch), &d); err != nil {
		return false
	}
	pod := d.Spec.Template.Spec
	if pod.SecurityContext == nil || !admitted(pod.SecurityContext.SeccompProfile) {
		return false
	}
	for _, c := range append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...) {
		if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil && !admitted(c.SecurityContext.SeccompProfile) {
			return false
		}
	}
	return true
}

// admitted says whether Pod Security "restricted" accepts the seccomp profile.
func admitted(p *corev1.SeccompProfile) bool {
	return p != nil && (p.Type == corev1.SeccompProfileTypeRuntimeDefault || p.Type == corev1.SeccompProfileTypeLocalhost)
}
