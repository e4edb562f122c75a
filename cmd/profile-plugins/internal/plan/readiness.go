package plan

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"istio.io/api/label"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// Istio's networking types are read as unstructured: the module's scheme registers only what the
// plugins write. networking.istio.io/v1 is served from Istio 1.22 on (istio.io/api
// kubernetes/customresourcedefinitions.gen.yaml).
var (
	destinationRuleGVK = schema.GroupVersionKind{Group: "networking.istio.io", Version: "v1", Kind: "DestinationRuleList"}
	virtualServiceGVK  = schema.GroupVersionKind{Group: "networking.istio.io", Version: "v1", Kind: "VirtualServiceList"}
)

// readiness lists what in namespace ambient mode ignores or breaks. Objects the runner manages,
// and those in skip (the plan rewrites them), are not judged.
func readiness(ctx context.Context, c client.Reader, cfg *config.Config, namespace string, skip map[string]bool) ([]ReadinessFinding, error) {
	var out []ReadinessFinding
	policies := &istiosecurityv1.AuthorizationPolicyList{}
	if err := c.List(ctx, policies, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing AuthorizationPolicies: %w", err)
	}
	for _, p := range policies.Items {
		if judged(p.Labels, "AuthorizationPolicy.security.istio.io/"+p.Name, skip) {
			out = append(out, policyFindings(cfg, namespace, p)...)
		}
	}
	services := &corev1.ServiceList{}
	if err := c.List(ctx, services, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing Services: %w", err)
	}
	for _, s := range services.Items {
		out = append(out, serviceFindings(s)...)
	}
	for _, r := range []struct {
		gvk   schema.GroupVersionKind
		judge func(*unstructured.Unstructured) []ReadinessFinding
	}{{destinationRuleGVK, destinationRuleFindings}, {virtualServiceGVK, virtualServiceFindings}} {
		found, err := listNetworking(ctx, c, r.gvk, namespace, r.judge)
		if err != nil {
			return out, err
		}
		out = append(out, found...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func judged(labels map[string]string, ref string, skip map[string]bool) bool {
	return labels[plugin.ManagedByLabel] != plugin.ManagedByValue && !skip[ref]
}

// listNetworking lists one Istio networking kind; a cluster without its CRD has nothing to judge.
func listNetworking(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace string,
	judge func(*unstructured.Unstructured) []ReadinessFinding) ([]ReadinessFinding, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk)
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing %s: %w", strings.TrimSuffix(gvk.Kind, "List"), err)
	}
	var out []ReadinessFinding
	for i := range list.Items {
		out = append(out, judge(&list.Items[i])...)
	}
	return out, nil
}

// policyFindings judges an AuthorizationPolicy without targetRefs. Istio's migration guide says
// policies with L7 rules, or with action CUSTOM or AUDIT, must use targetRefs, and that a policy a
// waypoint enforces must use targetRefs, not a selector (istio.io/latest/docs/ambient/migrate/
// migrate-policies and .../before-you-begin). ztunnel, which enforces the rest, drops an ALLOW
// rule with L7 attributes and strips them from a DENY rule (istio.io/latest/docs/ambient/usage/
// l4-policy; authz.L7Attributes lists the attributes).
func policyFindings(cfg *config.Config, namespace string, p *istiosecurityv1.AuthorizationPolicy) []ReadinessFinding {
	if len(p.Spec.GetTargetRefs()) > 0 || p.Spec.GetTargetRef() != nil {
		return nil
	}
	convert := fmt.Sprintf("convert it to targetRefs on the waypoint: kubectl -n %s get authorizationpolicy %s -o yaml | go run ./cmd/profile-plugins convert -gateway %s",
		namespace, p.Name, cfg.Mesh.Waypoint.Name)
	f := ReadinessFinding{Kind: "AuthorizationPolicy.security.istio.io", Name: p.Name, Severity: severityBreaks, Fix: convert}
	if a := p.Spec.GetAction(); a == securityv1beta1.AuthorizationPolicy_CUSTOM || a == securityv1beta1.AuthorizationPolicy_AUDIT {
		f.Reason = fmt.Sprintf("action %s without targetRefs: waypoints skip it and ztunnel cannot run it", a)
		return []ReadinessFinding{f}
	}
	l7 := authz.L7Attributes(&p.Spec)
	if len(l7) == 0 {
		return nil
	}
	f.Reason = fmt.Sprintf("%s without targetRefs has L7 rules (%s): waypoints skip it, and ztunnel, which enforces it, %s",
		scope(p), strings.Join(l7, ", "), l7Effect(p.Spec.GetAction()))
	return []ReadinessFinding{f}
}

func scope(p *istiosecurityv1.AuthorizationPolicy) string {
	if p.Spec.GetSelector() != nil {
		return "a selector policy"
	}
	return "a namespace-wide policy"
}

func l7Effect(a securityv1beta1.AuthorizationPolicy_Action) string {
	if a == securityv1beta1.AuthorizationPolicy_DENY {
		return "strips the L7 parts from its DENY rules, so they deny more than written"
	}
	return "drops its ALLOW rules that use them, so what they allowed is denied"
}

// serviceFindings judges a Service's own waypoint labels, which win over the namespace's. In
// istio/istio pilot/pkg/serviceregistry/kube/controller/ambient: waypoints.go (getUseWaypoint,
// fetchWaypointForTarget) reads istio.io/use-waypoint=none on the Service as "opt out of the
// namespace's waypoint"; ingressUseWaypointFromLabels reads the Service's
// istio.io/ingress-use-waypoint before the namespace's, and anything strconv.ParseBool does not
// read as true as false. The ztunnel policy this module writes admits only the waypoint, the
// namespace itself and the admin's L4 exceptions (authz.ZtunnelPolicy), so traffic that skips the
// waypoint from anywhere else is denied.
func serviceFindings(s corev1.Service) []ReadinessFinding {
	var out []ReadinessFinding
	fix := func(key string) string {
		return fmt.Sprintf("remove the label: kubectl -n %s label service %s %s-", s.Namespace, s.Name, key)
	}
	useWaypoint := label.IoIstioUseWaypoint.Name
	if s.Labels[useWaypoint] == "none" {
		out = append(out, ReadinessFinding{Kind: "Service", Name: s.Name, Severity: severityBreaks, Fix: fix(useWaypoint),
			Reason: useWaypoint + "=none opts the Service out of the namespace waypoint: its traffic skips the owner's L7 policy " +
				"and meets only the ztunnel policy, which admits only the waypoint and the namespace, so callers from elsewhere are denied"})
	}
	ingress := label.IoIstioIngressUseWaypoint.Name
	if v, set := s.Labels[ingress]; set {
		if on, err := strconv.ParseBool(v); err != nil || !on {
			out = append(out, ReadinessFinding{Kind: "Service", Name: s.Name, Severity: severityBreaks, Fix: fix(ingress),
				Reason: fmt.Sprintf("%s=%q on the Service overrides the namespace's label and sends the ingress gateway straight to the pods, "+
					"which the ztunnel policy does not admit, so requests through the Kubeflow gateway are denied", ingress, v)})
		}
	}
	return out
}

// destinationRuleFindings flags ISTIO_MUTUAL TLS. ztunnel ignores DestinationRules and always
// carries mesh traffic in HBONE mTLS; waypoints honour DestinationRule traffic policies
// (istio.io/latest/docs/ambient/migrate/migrate-policies). The setting is redundant for ambient
// clients, harmless for sidecar ones: worth a look, not a breakage.
func destinationRuleFindings(u *unstructured.Unstructured) []ReadinessFinding {
	paths := [][]string{{"spec", "trafficPolicy", "tls", "mode"}}
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "trafficPolicy", "portLevelSettings")
	var modes []string
	if m, _, _ := unstructured.NestedString(u.Object, paths[0]...); m != "" {
		modes = append(modes, m)
	}
	for _, p := range ports {
		if pm, ok := p.(map[string]any); ok {
			if m, _, _ := unstructured.NestedString(pm, "tls", "mode"); m != "" {
				modes = append(modes, m)
			}
		}
	}
	if !slices.Contains(modes, "ISTIO_MUTUAL") {
		return nil
	}
	return []ReadinessFinding{{Kind: "DestinationRule.networking.istio.io", Name: u.GetName(), Severity: severityReview,
		Reason: "tls mode ISTIO_MUTUAL: ztunnel ignores DestinationRules and always uses HBONE mTLS, so for ambient clients the setting does nothing",
		Fix:    "drop the tls block once no sidecar client needs it"}}
}

// virtualServiceFindings flags VirtualServices that apply inside the mesh (no gateways, or the
// reserved "mesh"). ztunnel does not route by them, waypoint support for them is Alpha, and mixing
// them with HTTPRoute is undefined (istio.io/latest/docs/ambient/migrate/migrate-policies).
// VirtualServices bound only to gateways (Kubeflow's notebooks on kubeflow-gateway) are unaffected.
func virtualServiceFindings(u *unstructured.Unstructured) []ReadinessFinding {
	gateways, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "gateways")
	if len(gateways) > 0 && !slices.Contains(gateways, "mesh") {
		return nil
	}
	return []ReadinessFinding{{Kind: "VirtualService.networking.istio.io", Name: u.GetName(), Severity: severityReview,
		Reason: "applies inside the mesh: ztunnel does not route by it, and waypoint support for VirtualService is Alpha",
		Fix:    "move its routes to an HTTPRoute whose parentRefs is the Service"}}
}
