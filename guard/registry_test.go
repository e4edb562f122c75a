package guard_test

// Every check of the registry against an attack of its own on the API server: the attack is
// written here, apart from the registry, for the asset it threatens; the check of that ID must be
// what refuses it. A check removed from the registry fails this test with the asset it protected,
// whether its attack is then admitted or refused by another check.

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// attack is what a member tries against one asset; its check must refuse it.
type attack struct {
	asset guard.Asset
	// oneOf are other checks allowed to report the refusal, where the attack cannot help
	// meeting them first (see the case).
	oneOf []string
	do    func(t *testing.T, a *arena) error
}

// arena is the namespace an attack runs in, with the clients it needs.
type arena struct {
	s   *server
	ns  string
	ctx context.Context
}

// podAttacks are the pod-capture and routing attacks in mode, each a change of a pod template,
// as a pod, a Deployment's template and a CronJob's.
func podAttacks(mode config.MeshMode) map[string]func(*corev1.PodTemplateSpec) {
	label := func(k, v string) func(*corev1.PodTemplateSpec) {
		return func(p *corev1.PodTemplateSpec) { p.Labels[k] = v }
	}
	annotate := func(k, v string) func(*corev1.PodTemplateSpec) {
		return func(p *corev1.PodTemplateSpec) { p.Annotations[k] = v }
	}
	routing := map[string]func(*corev1.PodTemplateSpec){
		"use-waypoint":                  label("istio.io/use-waypoint", "elsewhere"),
		"use-waypoint-namespace":        label("istio.io/use-waypoint-namespace", "other"),
		"use-waypoint-canary":           label("istio.io/use-waypoint-canary", "elsewhere"),
		"use-waypoint-canary-namespace": label("istio.io/use-waypoint-canary-namespace", "other"),
	}
	if mode == config.ModeSidecar {
		proxyEnv := func(name, value string) func(*corev1.PodTemplateSpec) {
			// A template's own istio-proxy, which the injector merges into its sidecar, or an
			// injected pod's.
			return func(p *corev1.PodTemplateSpec) {
				if !slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == "istio-proxy" }) {
					p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "proxyv2", Args: []string{"proxy", "sidecar"}})
				}
				for i := range p.Spec.Containers {
					if p.Spec.Containers[i].Name == "istio-proxy" {
						p.Spec.Containers[i].Env = append(p.Spec.Containers[i].Env, corev1.EnvVar{Name: name, Value: value})
					}
				}
			}
		}
		out := map[string]func(*corev1.PodTemplateSpec){
			"inject-not-true":    label("sidecar.istio.io/inject", "false"),
			"inbound-capture":    annotate("traffic.sidecar.istio.io/excludeInboundPorts", "8080"),
			"proxy-runs-sidecar": proxyEnv("DISABLE_ENVOY", "true"),
			"proxy-config":       annotate("proxy.istio.io/config", "{}"),
			"inject-templates":   annotate("inject.istio.io/templates", "grpc-agent"),
			"istio-init": func(p *corev1.PodTemplateSpec) {
				p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "istio-init", Image: "mine"})
			},
			// Templates only: on a pod the injector has merged the overrides already.
			"proxy-overrides": annotate("proxy.istio.io/overrides", "{}"),
		}
		maps.Copy(out, routing)
		return out
	}
	out := map[string]func(*corev1.PodTemplateSpec){
		"dataplane-mode-none":    label("istio.io/dataplane-mode", "none"),
		"reroute-interfaces":     annotate("istio.io/reroute-virtual-interfaces", "eth1"),
		"bypass-inbound-capture": annotate("ambient.istio.io/bypass-inbound-capture", "true"),
		"sidecar-status-only-from-injector": func(p *corev1.PodTemplateSpec) {
			p.Annotations["sidecar.istio.io/status"] = "{}"
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "proxyv2"})
		},
		// Without istio-proxy the annotation also meets sidecar-status-only-from-injector first:
		// an ambient pod never gets the annotation, and containers cannot be removed later.
		"sidecar-status-without-proxy": annotate("sidecar.istio.io/status", "{}"),
	}
	maps.Copy(out, routing)
	return out
}

func template(change func(*corev1.PodTemplateSpec)) corev1.PodTemplateSpec {
	p := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	change(&p)
	return p
}

// injected is a pod as Istio's injector leaves it in sidecar mode, changed by change; in ambient
// mode the plain template.
func injected(mode config.MeshMode, change func(*corev1.PodTemplateSpec)) corev1.PodTemplateSpec {
	if mode != config.ModeSidecar {
		return template(change)
	}
	return template(func(p *corev1.PodTemplateSpec) {
		p.Annotations["sidecar.istio.io/status"] = `{"containers":["istio-proxy"]}`
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "proxyv2", Args: []string{"proxy", "sidecar"}})
		change(p)
	})
}

// attacks are one per check of the default guard in mode, by check ID.
func attacks(mode config.MeshMode) map[string]attack {
	out := map[string]attack{}
	for suffix, change := range podAttacks(mode) {
		asset := guard.AssetPodCapture
		if strings.HasPrefix(suffix, "use-waypoint") {
			asset = guard.AssetWaypointRouting
		}
		var oneOf []string
		if suffix == "sidecar-status-without-proxy" {
			oneOf = []string{"sidecar-status-only-from-injector"}
		}
		prefixed := func(policy string) []string {
			var ids []string
			for _, id := range oneOf {
				ids = append(ids, policy+"/"+id)
			}
			return ids
		}
		if suffix != "proxy-overrides" {
			out["pods/"+suffix] = attack{asset: asset, oneOf: prefixed("pods"), do: func(t *testing.T, a *arena) error {
				tpl := injected(mode, change)
				pod := &corev1.Pod{ObjectMeta: tpl.ObjectMeta, Spec: tpl.Spec}
				pod.Name, pod.Namespace = "pods-"+suffix, a.ns
				return a.s.as(t, widened).Create(a.ctx, pod, client.DryRunAll)
			}}
		}
		out["workloads/"+suffix] = attack{asset: asset, oneOf: prefixed("workloads"), do: func(t *testing.T, a *arena) error {
			return a.s.as(t, widened).Create(a.ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "workloads-" + suffix, Namespace: a.ns},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, Template: template(change)}}, client.DryRunAll)
		}}
		out["cronjobs/"+suffix] = attack{asset: asset, oneOf: prefixed("cronjobs"), do: func(t *testing.T, a *arena) error {
			tpl := template(change)
			tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
			return a.s.as(t, widened).Create(a.ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "cronjobs-" + suffix, Namespace: a.ns},
				Spec: batchv1.CronJobSpec{Schedule: "@daily", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}}}}, client.DryRunAll)
		}}
		if strings.HasPrefix(suffix, "use-waypoint") {
			out["services/"+suffix] = attack{asset: asset, do: func(t *testing.T, a *arena) error {
				tpl := template(change)
				return a.s.as(t, widened).Create(a.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc-" + suffix, Namespace: a.ns, Labels: tpl.Labels},
					Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, client.DryRunAll)
			}}
		}
	}
	if mode == config.ModeSidecar {
		out["pods/keeps-sidecar-status"] = attack{asset: guard.AssetPodCapture, do: func(t *testing.T, a *arena) error {
			tpl := injected(mode, func(*corev1.PodTemplateSpec) {})
			pod := &corev1.Pod{ObjectMeta: tpl.ObjectMeta, Spec: tpl.Spec}
			pod.Name, pod.Namespace = "injected", a.ns
			require.NoError(t, a.s.env.Client.Create(a.ctx, pod), "an injected pod")
			delete(pod.Annotations, "sidecar.istio.io/status")
			return a.s.as(t, widened).Update(a.ctx, pod, client.DryRunAll)
		}}
		out["pods/injected"] = attack{asset: guard.AssetPodCapture, do: func(t *testing.T, a *arena) error {
			return a.s.as(t, widened).Create(a.ctx, plainPod(a.ns, "not-injected"), client.DryRunAll)
		}}
	}
	member := func(obj func(a *arena) client.Object) func(*testing.T, *arena) error {
		return func(t *testing.T, a *arena) error { return a.s.as(t, widened).Create(a.ctx, obj(a), client.DryRunAll) }
	}
	cr := func(apiVersion, kind string, labels map[string]string, annotations map[string]string, spec map[string]any) func(a *arena) client.Object {
		return func(a *arena) client.Object {
			u := meshObject(apiVersion, kind, a.ns, strings.ToLower(kind)+"-attack", spec)
			u.SetLabels(labels)
			u.SetAnnotations(annotations)
			return u
		}
	}
	managedLabels := map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "waypoint"}
	for id, a := range map[string]attack{
		"services/endpoint-foreign-pods": {asset: guard.AssetServiceMembership, do: member(func(a *arena) client.Object {
			return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: a.ns}, Subsets: []corev1.EndpointSubset{{ //nolint:staticcheck // the Endpoints API is what is tried
				Addresses: []corev1.EndpointAddress{{IP: "10.0.0.7", TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "someone-else", Name: "db-0"}}}}}}
		})},
		"managed-objects/labels": {asset: guard.AssetPluginObjects, do: member(func(a *arena) client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "copied", Namespace: a.ns, Labels: managedLabels}}
		})},
		"managed-objects/reserved-names": {asset: guard.AssetPluginObjects, do: member(func(a *arena) client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: wp + "-seccomp", Namespace: a.ns}}
		})},
		"managed-objects/unchanged": {asset: guard.AssetPluginObjects, do: func(t *testing.T, a *arena) error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "the-plugins", Namespace: a.ns, Labels: managedLabels}}
			require.NoError(t, a.s.env.Client.Create(a.ctx, cm), "the plugins' ConfigMap")
			cm.Data = map[string]string{"mine": "x"}
			return a.s.as(t, widened).Update(a.ctx, cm, client.DryRunAll)
		}},
		"namespace-labels/labels": {asset: guard.AssetNamespaceLabels, do: func(t *testing.T, a *arena) error {
			n := &corev1.Namespace{}
			require.NoError(t, a.s.env.Client.Get(a.ctx, client.ObjectKey{Name: a.ns}, n))
			n.Labels["istio.io/dataplane-mode"] = "none"
			return a.s.as(t, nsWriter).Update(a.ctx, n, client.DryRunAll)
		}},
		"namespace-labels/owner-annotation": {asset: guard.AssetNamespaceLabels, do: func(t *testing.T, a *arena) error {
			n := &corev1.Namespace{}
			require.NoError(t, a.s.env.Client.Get(a.ctx, client.ObjectKey{Name: a.ns}, n))
			n.Annotations[ownership.OwnerAnnotation] = "mallory@example.com"
			return a.s.as(t, nsWriter).Update(a.ctx, n, client.DryRunAll)
		}},
		// A Binding's labels put a member's running pod behind the waypoint Service (the webhook review of Dec 5).
		"bindings/labels": {asset: guard.AssetServiceMembership, do: func(t *testing.T, a *arena) error {
			pod := plainPod(a.ns, "behind-the-waypoint")
			require.NoError(t, a.s.env.Client.Create(a.ctx, pod))
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: a.ns, Labels: map[string]string{
				"gateway.networking.k8s.io/gateway-name": wp, "topology.kubernetes.io/zone": "z1"}},
				Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
			return a.s.as(t, widened).SubResource("binding").Create(a.ctx, pod, b, client.DryRunAll)
		}},
		"bindings/istio-metadata": {asset: guard.AssetPodCapture, do: func(t *testing.T, a *arena) error {
			pod := plainPod(a.ns, "unscheduled")
			require.NoError(t, a.s.env.Client.Create(a.ctx, pod))
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: a.ns, Annotations: map[string]string{"ambient.istio.io/bypass-inbound-capture": "true"}},
				Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
			return a.s.as(t, widened).SubResource("binding").Create(a.ctx, pod, b, client.DryRunAll)
		}},
		"kubeflow/poddefault-istio": {asset: guard.AssetPodCapture, do: member(cr("kubeflow.org/v1alpha1", "PodDefault", nil, nil, map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}, "labels": map[string]any{"istio.io/dataplane-mode": "none"}}))},
		"kubeflow/poddefault-selects-waypoint": {asset: guard.AssetWaypointWorkload, do: member(cr("kubeflow.org/v1alpha1", "PodDefault", nil, nil, map[string]any{
			"selector": map[string]any{}, "env": []any{map[string]any{"name": "ISTIO_BOOTSTRAP_OVERRIDE", "value": "/etc/mine/envoy.yaml"}}}))},
		"kubeflow/poddefault-waypoint-identity": {asset: guard.AssetWaypointIdentity, do: member(cr("kubeflow.org/v1alpha1", "PodDefault", nil, nil, map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "mine"}}, "serviceAccountName": wp}))},
		"kubeflow/notebook-user-id-header": {asset: guard.AssetUserIdentity, do: member(cr("kubeflow.org/v1", "Notebook", nil,
			map[string]string{"notebooks.kubeflow.org/http-headers-request-set": `{"kubeflow-userid":"alice@example.com"}`}, map[string]any{}))},
		"kubeflow/katib-istio": {asset: guard.AssetPodCapture, do: member(cr("kubeflow.org/v1beta1", "Trial", map[string]string{"istio.io/dataplane-mode": "none"}, nil, map[string]any{}))},
		"kubeflow/spark-istio-containers": {asset: guard.AssetPodCapture, do: member(cr("sparkoperator.k8s.io/v1beta2", "SparkApplication", nil, nil, map[string]any{
			"driver": map[string]any{"initContainers": []any{map[string]any{"name": "istio-init", "image": "mine"}}}}))},
		"waypoint/objects": {asset: guard.AssetWaypointWorkload, do: member(func(a *arena) client.Object {
			return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: wp, Namespace: a.ns}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "x"}, Ports: []corev1.ServicePort{{Port: 15008}}}}
		})},
		"waypoint/service-account": {asset: guard.AssetWaypointIdentity, do: func(t *testing.T, a *arena) error {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: wp, Namespace: a.ns}}
			require.NoError(t, a.s.as(t, istiod).Create(a.ctx, sa), "istiod makes the waypoint's ServiceAccount")
			return a.s.as(t, widened).SubResource("token").Create(a.ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"istio-ca"}}})
		}},
		"waypoint/token-secret": {asset: guard.AssetWaypointIdentity, do: member(func(a *arena) client.Object {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wp-token", Namespace: a.ns, Annotations: map[string]string{corev1.ServiceAccountNameKey: wp}},
				Type: corev1.SecretTypeServiceAccountToken}
		})},
		// A contributor's token for default-editor (kubeflow-edit) would outlive kfam's removal of them.
		"tokens/secrets": {asset: guard.AssetServiceAccountTokens, do: member(func(a *arena) client.Object {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "editor-token", Namespace: a.ns, Annotations: map[string]string{corev1.ServiceAccountNameKey: "default-editor"}},
				Type: corev1.SecretTypeServiceAccountToken}
		})},
		"waypoint/pods": {asset: guard.AssetWaypointIdentity, do: member(func(a *arena) client.Object {
			tpl := injected(mode, func(p *corev1.PodTemplateSpec) { p.Spec.ServiceAccountName = wp })
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "as-waypoint", Namespace: a.ns, Labels: tpl.Labels, Annotations: tpl.Annotations}, Spec: tpl.Spec}
		})},
		"waypoint/templates": {asset: guard.AssetWaypointIdentity, do: member(func(a *arena) client.Object {
			tpl := template(func(p *corev1.PodTemplateSpec) { p.Spec.ServiceAccountName = wp })
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "as-waypoint", Namespace: a.ns},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, Template: tpl}}
		})},
		"waypoint/endpoint-slices": {asset: guard.AssetWaypointWorkload, do: member(func(a *arena) client.Object {
			return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "waypoint-mine", Namespace: a.ns, Labels: map[string]string{discoveryv1.LabelServiceName: wp}},
				AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}}}}
		})},
		"waypoint/scaling": {asset: guard.AssetWaypointWorkload, do: member(func(a *arena) client.Object {
			return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: a.ns}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: wp}, MaxReplicas: 20}}
		})},
		"waypoint/service-selectors": {asset: guard.AssetWaypointWorkload, do: member(func(a *arena) client.Object {
			return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mirror", Namespace: a.ns}, Spec: corev1.ServiceSpec{
				Selector: map[string]string{"gateway.networking.k8s.io/gateway-name": wp}, Ports: []corev1.ServicePort{{Port: 15020}}}}
		})},
		"waypoint/trust-root": {asset: guard.AssetWaypointWorkload, do: member(func(a *arena) client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "istio-ca-root-cert", Namespace: a.ns}, Data: map[string]string{"root-cert.pem": "mine"}}
		})},
		"waypoint/exec": {asset: guard.AssetWaypointWorkload, do: func(t *testing.T, a *arena) error {
			return a.s.connect(t, editor, a.ns, "pods", "waypoint-7d4b9c-x2x4q", "exec")
		}},
		"mesh-config/proxy-configuration": {asset: guard.AssetWaypointWorkload, do: member(cr("networking.istio.io/v1alpha3", "EnvoyFilter", nil, nil, map[string]any{
			"configPatches": []any{map[string]any{"applyTo": "HTTP_FILTER", "patch": map[string]any{"operation": "REMOVE"}}}}))},
		"mesh-config/peer-authentication": {asset: guard.AssetPodCapture, do: member(cr("security.istio.io/v1", "PeerAuthentication", nil, nil,
			map[string]any{"mtls": map[string]any{"mode": "DISABLE"}}))},
		"mesh-config/workload-registry": {asset: guard.AssetServiceMembership, do: member(cr("networking.istio.io/v1", "WorkloadEntry", nil, nil,
			map[string]any{"address": "10.0.0.9", "serviceAccount": wp}))},
		"mesh-config/gateways": {asset: guard.AssetWaypointRouting, do: member(cr("gateway.networking.k8s.io/v1", "Gateway", nil, nil, map[string]any{
			"gatewayClassName": "istio", "listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}}))},
		"mesh-config/gateway-rendering": {asset: guard.AssetWaypointIdentity, do: member(func(a *arena) client.Object {
			// Even the Gateway the admin allows by name may not overlay istiod's template.
			return meshObject("gateway.networking.k8s.io/v1", "Gateway", a.ns, "ingress", map[string]any{"gatewayClassName": "istio",
				"infrastructure": map[string]any{"parametersRef": map[string]any{"group": "", "kind": "ConfigMap", "name": "ingress-params"}},
				"listeners":      []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}})
		})},
		"mesh-config/istio-gateways": {asset: guard.AssetUserIdentity, do: member(cr("networking.istio.io/v1", "Gateway", nil, nil, map[string]any{
			"selector": map[string]any{"istio": "ingressgateway"},
			"servers":  []any{map[string]any{"port": map[string]any{"number": int64(8080), "name": "http", "protocol": "HTTP"}, "hosts": []any{"*"}}}}))},
		// A route on the platform's ingress gateway that names the victim as the signed-in user
		// (the tenant review of Dec 5): the header's case does not matter to Envoy.
		"mesh-config/user-id-header": {asset: guard.AssetUserIdentity, do: member(cr("networking.istio.io/v1", "VirtualService", nil, nil, map[string]any{
			"hosts": []any{"*"}, "gateways": []any{"kubeflow/kubeflow-gateway"},
			"http": []any{map[string]any{"route": []any{map[string]any{"destination": map[string]any{"host": "web.victim.svc.cluster.local"},
				"headers": map[string]any{"request": map[string]any{"set": map[string]any{"Kubeflow-UserID": "alice@example.com"}}}}}}}}))},
		"mesh-config/allow-policies": {asset: guard.AssetAccess, do: member(cr("security.istio.io/v1", "AuthorizationPolicy", nil, nil, map[string]any{
			"rules": []any{map[string]any{"when": []any{map[string]any{"key": "request.headers[kubeflow-userid]", "values": []any{"bob@example.com"}}}}}}))},
	} {
		out[id] = a
	}
	if mode == config.ModeSidecar {
		// Katib's suggestion labels, which let kube-controller-manager's pods opt out of the
		// sidecar as Katib's suggestions do (the webhook review of Dec 5), anywhere but on Katib's
		// own suggestion Deployment.
		katibs := template(func(p *corev1.PodTemplateSpec) { p.Labels["katib.kubeflow.org/suggestion"] = "tune" })
		out["workloads/katib-suggestion-labels"] = attack{asset: guard.AssetPodCapture, do: member(func(a *arena) client.Object {
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "tune-random", Namespace: a.ns},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, Template: katibs}}
		})}
		out["cronjobs/katib-suggestion-labels"] = attack{asset: guard.AssetPodCapture, do: member(func(a *arena) client.Object {
			tpl := *katibs.DeepCopy()
			tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
			return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "tune", Namespace: a.ns},
				Spec: batchv1.CronJobSpec{Schedule: "@daily", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}}}}
		})}
		out["kubeflow/poddefault-katib-labels"] = attack{asset: guard.AssetPodCapture, do: member(cr("kubeflow.org/v1alpha1", "PodDefault", nil, nil, map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}, "labels": map[string]any{"katib.kubeflow.org/suggestion": "tune"}}))}
		out["kubeflow/katib-suggestion-labels"] = attack{asset: guard.AssetPodCapture, do: member(cr("kubeflow.org/v1beta1", "Trial", map[string]string{"katib.kubeflow.org/deployment": "tune-random"}, nil, map[string]any{}))}
	}
	return out
}

// installKubeflowCRDs installs open-schema CRDs of the Kubeflow kinds the kubeflow policy judges,
// unless the server has them, and waits until they are served.
func installKubeflowCRDs(t *testing.T, s *server) {
	t.Helper()
	for _, k := range []struct{ group, version, kind, plural string }{
		{"kubeflow.org", "v1alpha1", "PodDefault", "poddefaults"}, {"kubeflow.org", "v1", "Notebook", "notebooks"},
		{"kubeflow.org", "v1beta1", "Trial", "trials"}, {"kubeflow.org", "v1beta1", "Experiment", "experiments"}, {"sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkapplications"},
	} {
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": k.plural + "." + k.group,
				// sparkoperator.k8s.io is a protected group, as the operator's own CRD says.
				"annotations": map[string]any{"api-approved.kubernetes.io": "https://github.com/kubeflow/spark-operator/pull/1298"}},
			"spec": map[string]any{"group": k.group, "scope": "Namespaced",
				"names": map[string]any{"kind": k.kind, "listKind": k.kind + "List", "plural": k.plural, "singular": strings.ToLower(k.kind)},
				"versions": []any{map[string]any{"name": k.version, "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
						"spec": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}},
		}}
		if err := s.env.Client.Create(context.Background(), crd); !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool {
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion(k.group + "/" + k.version)
			l.SetKind(k.kind + "List")
			return s.env.Client.List(context.Background(), l) == nil
		}, 30*time.Second, 200*time.Millisecond, "%s is served", k.kind)
	}
}

func TestEveryCheckRefusesItsAttackOnTheAPIServer(t *testing.T) {
	t.Parallel()
	t.Run("ambient", func(t *testing.T) { t.Parallel(); everyCheckRefusesItsAttack(t, guarded(t)) })
	t.Run("sidecar", func(t *testing.T) { t.Parallel(); everyCheckRefusesItsAttack(t, guardedInSidecarMode(t)) })
}

func everyCheckRefusesItsAttack(t *testing.T, s *server) {
	installKubeflowCRDs(t, s)
	ns := s.namespace(t, "registry-"+string(s.cfg.Mesh.Mode))
	checks, err := guard.Checks(s.cfg)
	require.NoError(t, err)
	table := attacks(s.cfg.Mesh.Mode)
	inRegistry := map[string]bool{}
	for _, c := range checks {
		inRegistry[c.ID] = true
		a, ok := table[c.ID]
		if !ok {
			t.Errorf("check %s (asset %s) has no attack here: add one", c.ID, c.Asset)
			continue
		}
		t.Run(c.ID, func(t *testing.T) {
			ar := &arena{s: s, ns: ns, ctx: context.Background()}
			err := a.do(t, ar)
			if len(a.oneOf) > 0 {
				refusedByOneOf(t, err, append([]string{c.ID}, a.oneOf...), "asset %s", a.asset)
				return
			}
			refusedBy(t, err, c.ID, "asset %s", a.asset)
		})
	}
	for id, a := range table {
		if !inRegistry[id] {
			t.Errorf("asset %s lost its check %s: the registry no longer has it", a.asset, id)
		}
	}
}
