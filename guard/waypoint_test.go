package guard_test

// The waypoint's workload and identity (checks waypoint/*) on the API server: members bound to
// Kubeflow's roles, and one given more, try every way into the waypoint that the trust model
// lists, in a namespace without a waypoint (idle on demand) and in one where istiod deployed it;
// istiod, Kubernetes' controllers and the kubelet keep doing their part.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

const wp = "waypoint"

// waypointLabels are the labels istiod gives the waypoint's pods (istio
// manifests/charts/istio-control/istio-discovery/files/waypoint.yaml).
func waypointLabels() map[string]string {
	return map[string]string{
		"sidecar.istio.io/inject": "false", "istio.io/dataplane-mode": "none",
		"gateway.networking.k8s.io/gateway-name": wp, "gateway.networking.k8s.io/gateway-class-name": "istio-waypoint",
		"gateway.istio.io/managed": "istio.io-mesh-controller",
	}
}

func waypointPodSpec() corev1.PodSpec {
	return corev1.PodSpec{ServiceAccountName: wp, Containers: []corev1.Container{{Name: "istio-proxy", Image: "istio/proxyv2", Args: []string{"proxy", "waypoint"}}}}
}

// waypointDeployment is the Deployment istiod writes for the waypoint Gateway.
func waypointDeployment(ns string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: wp, Namespace: ns, Labels: map[string]string{"gateway.istio.io/managed": "istio.io-mesh-controller", "gateway.networking.k8s.io/gateway-name": wp}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"gateway.networking.k8s.io/gateway-name": wp}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: waypointLabels()}, Spec: waypointPodSpec()},
		},
	}
}

// waypointPod is a pod of the waypoint's ReplicaSet, as the ReplicaSet controller creates it.
func waypointPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: waypointLabels(),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: wp + "-7d4b9c", UID: "0b1c2d3e", Controller: ptr.To(true)}}},
		Spec: waypointPodSpec()}
}

func plainPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
}

// The objects istiod deploys under the waypoint's name are nobody else's: a member cannot prepare
// them in an idle namespace (where istiod would adopt a Deployment carrying its label, keeping the
// member's containers), nor change, scale or delete istiod's; istiod writes them, the garbage
// collector deletes them.
func TestWaypointObjectsAreIstiodsAlone(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	idle, active := s.namespace(t, "wp-idle"), s.namespace(t, "wp-active")

	planted := waypointDeployment(idle)
	planted.Spec.Template.Labels = map[string]string{"gateway.networking.k8s.io/gateway-name": wp, "gateway.istio.io/managed": "istio.io-mesh-controller"}
	planted.Spec.Template.Spec.ServiceAccountName = "default"
	planted.Spec.Template.Spec.Containers = append(planted.Spec.Template.Spec.Containers, corev1.Container{Name: "mine", Image: "mine"})
	for _, user := range members() {
		c := s.as(t, user)
		refusedBy(t, c.Create(ctx, planted.DeepCopy(), client.DryRunAll), "waypoint/objects", "%s: a Deployment istiod would adopt", user)
		plain := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: wp, Namespace: idle}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}, Spec: plainPod("", "").Spec}}}
		refusedBy(t, c.Create(ctx, plain, client.DryRunAll), "waypoint/objects", "%s: any Deployment under the waypoint's name", user)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: wp, Namespace: idle}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "x"}, Ports: []corev1.ServicePort{{Port: 15008}}}}
		refusedBy(t, c.Create(ctx, svc, client.DryRunAll), "waypoint/objects", "%s: a Service under the waypoint's name, whose endpoints istiod would take for the waypoint's", user)
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: wp, Namespace: idle}} //nolint:staticcheck // the Endpoints API is what is tried
		refusedBy(t, c.Create(ctx, ep, client.DryRunAll), "waypoint/objects", "%s: the waypoint Service's Endpoints", user)
	}
	c := s.as(t, widened)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: wp, Namespace: idle}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: wp}, MaxReplicas: 1}}
	refusedBy(t, c.Create(ctx, hpa, client.DryRunAll), "waypoint/objects", "an autoscaler under the waypoint's name")
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: wp, Namespace: idle}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"gateway.networking.k8s.io/gateway-name": wp}}}}
	refusedBy(t, c.Create(ctx, pdb, client.DryRunAll), "waypoint/objects", "a disruption budget under the waypoint's name")

	// istiod deploys the waypoint; then nobody else touches it.
	dep := waypointDeployment(active)
	require.NoError(t, s.as(t, istiod).Create(ctx, dep, client.FieldOwner("istio.io/gateway-controller")), "istiod deploys the waypoint")
	for _, user := range members() {
		c := s.as(t, user)
		changed := dep.DeepCopy()
		changed.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "ISTIO_BOOTSTRAP_OVERRIDE", Value: "/etc/mine/envoy.yaml"}}
		// Its template opts out of the mesh, so the workloads policy refuses a member's update too.
		opts := []string{"waypoint/objects", "workloads/dataplane-mode-none"}
		refusedByOneOf(t, c.Update(ctx, changed, client.DryRunAll), opts, "%s: an env var on istiod's waypoint", user)
		scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: wp, Namespace: active}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}
		refusedByRBACOrGuard(t, c.SubResource("scale").Update(ctx, dep.DeepCopy(), client.WithSubResourceBody(scale), client.DryRunAll), "waypoint/objects", "%s: scaling the waypoint", user)
		refusedBy(t, c.Delete(ctx, dep.DeepCopy(), client.DryRunAll), "waypoint/objects", "%s: deleting the waypoint", user)
	}
	require.NoError(t, s.as(t, istiod).Update(ctx, dep.DeepCopy(), client.DryRunAll), "istiod re-applies its Deployment")
	// A deletecollection reaches admission once per object, without a request name: the
	// waypoint's objects stay refused, the member's own go.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: wp, Namespace: active}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"gateway.networking.k8s.io/gateway-name": wp}, Ports: []corev1.ServicePort{{Port: 15008}}}}
	require.NoError(t, s.as(t, istiod).Create(ctx, svc), "istiod makes the waypoint Service")
	refusedBy(t, s.as(t, editor).DeleteAllOf(ctx, &corev1.Service{}, client.InNamespace(active), client.DryRunAll), "waypoint/objects", "deletecollection of the namespace's Services")
	rsScale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: wp + "-7d4b9c", Namespace: active}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: wp + "-7d4b9c", Namespace: active}, Spec: appsv1.ReplicaSetSpec{
		Selector: dep.Spec.Selector, Template: dep.Spec.Template}}
	require.NoError(t, s.as(t, kcm).Create(ctx, rs), "the Deployment controller makes the waypoint's ReplicaSet")
	refusedBy(t, s.as(t, editor).SubResource("scale").Update(ctx, rs.DeepCopy(), client.WithSubResourceBody(rsScale), client.DryRunAll), "waypoint/scaling", "scaling the waypoint's ReplicaSet")
	require.NoError(t, s.as(t, kcm).Delete(ctx, dep.DeepCopy(), client.DryRunAll), "the garbage collector deletes it with its Gateway")
}

// The waypoint's identity: its ServiceAccount is istiod's, no member gets a token of it (by a
// token request or a token Secret, which the token controller would fill), and a kubelet still
// gets the tokens of the waypoint pods it runs.
func TestWaypointServiceAccountAndTokensAreNobodyElses(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := s.namespace(t, "wp-identity")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: wp, Namespace: ns}}
	for _, user := range members() {
		refusedBy(t, s.as(t, user).Create(ctx, sa.DeepCopy(), client.DryRunAll), "waypoint/service-account", "%s: a ServiceAccount under the waypoint's name, before istiod makes it", user)
	}
	require.NoError(t, s.as(t, istiod).Create(ctx, sa.DeepCopy()), "istiod makes the waypoint's ServiceAccount")
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"istio-ca"}}}
	for _, user := range members() {
		c := s.as(t, user)
		refusedByRBACOrGuard(t, c.SubResource("token").Create(ctx, sa.DeepCopy(), tr.DeepCopy()), "waypoint/service-account", "%s: a token of the waypoint's identity", user)
		refusedBy(t, c.Delete(ctx, sa.DeepCopy(), client.DryRunAll), "waypoint/service-account", "%s: deleting it", user)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wp-token", Namespace: ns, Annotations: map[string]string{corev1.ServiceAccountNameKey: wp}},
			Type: corev1.SecretTypeServiceAccountToken}
		refusedBy(t, c.Create(ctx, secret, client.DryRunAll), "waypoint/token-secret", "%s: a token Secret the token controller would fill", user)
		// Another ServiceAccount's token Secret would outlive its maker's membership (the tokens
		// policy; the tenant review of Dec 5); any other Secret is the member's business.
		secret.Annotations[corev1.ServiceAccountNameKey] = "default-editor"
		refusedBy(t, c.Create(ctx, secret, client.DryRunAll), "tokens/secrets", "%s: a token Secret of default-editor", user)
		secret.Type = corev1.SecretTypeOpaque
		notTheGuards(t, c.Create(ctx, secret, client.DryRunAll), "%s: an Opaque Secret", user)
	}
	own := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns}}
	require.NoError(t, s.as(t, widened).Create(ctx, own), "a member's own ServiceAccount")
	require.NoError(t, s.as(t, widened).SubResource("token").Create(ctx, own, tr.DeepCopy()), "a token of the member's own ServiceAccount")
	require.NoError(t, s.as(t, kubelet).SubResource("token").Create(ctx, sa.DeepCopy(), tr.DeepCopy()), "the kubelet requests the waypoint pod's token")
}

// The waypoint's pods: only the ReplicaSet controller makes them (the pods policy then lets them
// opt out, as istiod's template does); no member's pod runs as the waypoint's ServiceAccount or
// carries the labels the waypoint Service selects, and nobody changes, extends or deletes the
// waypoint's pods but Kubernetes.
func TestWaypointPodsAreTheReplicaSetControllersAlone(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := s.namespace(t, "wp-pods")
	pod := waypointPod(ns, "waypoint-7d4b9c-x2x4q")
	for _, user := range members() {
		c := s.as(t, user)
		refusedBy(t, c.Create(ctx, pod.DeepCopy(), client.DryRunAll), "waypoint/pods", "%s: the waypoint's own pod", user)
		asWaypoint := plainPod(ns, "as-waypoint")
		asWaypoint.Spec.ServiceAccountName = wp
		refusedBy(t, c.Create(ctx, asWaypoint, client.DryRunAll), "waypoint/pods", "%s: a pod running as the waypoint", user)
		legacy := plainPod(ns, "as-waypoint-legacy")
		legacy.Spec.DeprecatedServiceAccount = wp
		refusedBy(t, c.Create(ctx, legacy, client.DryRunAll), "waypoint/pods", "%s: the same through the deprecated serviceAccount field", user)
		endpoint := plainPod(ns, "endpoint")
		endpoint.Labels = map[string]string{"gateway.networking.k8s.io/gateway-name": wp}
		refusedBy(t, c.Create(ctx, endpoint, client.DryRunAll), "waypoint/pods", "%s: a pod the waypoint Service would select", user)
		notTheGuards(t, c.Create(ctx, plainPod(ns, "plain-"+user[:3]), client.DryRunAll), "%s: a plain pod", user)
	}
	for _, maker := range []string{rsCtl, kcm} {
		require.NoError(t, s.as(t, maker).Create(ctx, pod.DeepCopy(), client.DryRunAll), "%s makes the waypoint's pods", maker)
		// A member's pod that a PodDefault set to run as the waypoint and labelled for its
		// Service (R15 W-1): without istiod's managed label it is not istiod's.
		merged := plainPod(ns, "mine-5f7d8-abcde")
		merged.Spec.ServiceAccountName = wp
		merged.Labels = map[string]string{"app": "mine", "gateway.networking.k8s.io/gateway-name": wp}
		refusedBy(t, s.as(t, maker).Create(ctx, merged.DeepCopy(), client.DryRunAll), "waypoint/pods", "%s makes a member's pod a webhook set to run as the waypoint", maker)
		merged.Labels = map[string]string{"app": "mine", "istio.io/dataplane-mode": "none"}
		refusedByOneOf(t, s.as(t, maker).Create(ctx, merged, client.DryRunAll), []string{"waypoint/pods", "pods/dataplane-mode-none"},
			"%s makes an opted-out pod that runs as the waypoint", maker)
	}
	require.NoError(t, s.as(t, rsCtl).Create(ctx, pod))
	for _, user := range members() {
		c := s.as(t, user)
		relabelled := pod.DeepCopy()
		relabelled.Labels["mine"] = "x"
		refusedBy(t, c.Update(ctx, relabelled, client.DryRunAll), "waypoint/pods", "%s: changing the waypoint's pod", user)
		refusedBy(t, c.Delete(ctx, pod.DeepCopy(), client.DryRunAll), "waypoint/pods", "%s: deleting it", user)
		debug := pod.DeepCopy()
		debug.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
		refusedByRBACOrGuard(t, c.SubResource("ephemeralcontainers").Update(ctx, debug, client.DryRunAll), "waypoint/pods", "%s: an ephemeral container in it", user)
	}
	require.NoError(t, s.as(t, kubelet).Delete(ctx, pod.DeepCopy(), client.DryRunAll), "the kubelet deletes the pod it ran")
	require.NoError(t, s.as(t, rsCtl).Delete(ctx, pod.DeepCopy(), client.DryRunAll), "the ReplicaSet controller scales it down")
}

// No member's workload has a pod template of the waypoint's: its pods, made by Kubernetes'
// controllers, would run as the waypoint or take its traffic.
func TestWaypointTemplatesAreIstiodsAlone(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := s.namespace(t, "wp-templates")
	asWaypoint := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}, Spec: plainPod("", "").Spec}
	asWaypoint.Spec.ServiceAccountName = wp
	selected := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x", "gateway.networking.k8s.io/gateway-name": wp}}, Spec: plainPod("", "").Spec}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	for _, user := range members() {
		c := s.as(t, user)
		for name, tpl := range map[string]corev1.PodTemplateSpec{"as-waypoint": asWaypoint, "selected": selected} {
			refusedBy(t, c.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: appsv1.DeploymentSpec{Selector: sel, Template: tpl}}, client.DryRunAll), "waypoint/templates", "%s: Deployment %s", user, name)
			refusedBy(t, c.Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: tpl}}, client.DryRunAll), "waypoint/templates", "%s: ReplicaSet %s", user, name)
			refusedBy(t, c.Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: appsv1.StatefulSetSpec{Selector: sel, Template: tpl}}, client.DryRunAll), "waypoint/templates", "%s: StatefulSet %s", user, name)
			jobTpl := tpl.DeepCopy()
			jobTpl.Spec.RestartPolicy = corev1.RestartPolicyNever
			refusedBy(t, c.Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: batchv1.CronJobSpec{Schedule: "@daily", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: *jobTpl}}}}, client.DryRunAll),
				"waypoint/templates", "%s: CronJob %s", user, name)
		}
	}
}

// The waypoint Service's endpoints are the EndpointSlice controller's.
func TestWaypointEndpointSlicesAreKubernetesAlone(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := s.namespace(t, "wp-slices")
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "waypoint-mine", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: wp}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}}}}
	refusedBy(t, s.as(t, widened).Create(ctx, slice.DeepCopy(), client.DryRunAll), "waypoint/endpoint-slices", "an EndpointSlice of the waypoint Service")
	require.NoError(t, s.as(t, kcm).Create(ctx, slice.DeepCopy(), client.DryRunAll), "the EndpointSlice controller writes them")
	slice.Labels[discoveryv1.LabelServiceName] = "web"
	notTheGuards(t, s.as(t, widened).Create(ctx, slice, client.DryRunAll), "an EndpointSlice of the member's own Service")
}

// Nobody execs, attaches, port-forwards or proxies into the waypoint (kubeflow-edit grants all
// four on pods, and services/proxy), while the member's own pods stay reachable so.
func TestWaypointAcceptsNoExecAttachPortForwardOrProxy(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ns := s.namespace(t, "wp-exec")
	for _, user := range []string{editor, admin} {
		for _, sub := range []string{"exec", "attach", "portforward", "proxy"} {
			refusedBy(t, s.connect(t, user, ns, "pods", "waypoint-7d4b9c-x2x4q", sub), "waypoint/exec", "%s: pods/%s", user, sub)
			notTheGuards(t, s.connect(t, user, ns, "pods", "notebook-0", sub), "%s: pods/%s of the member's own pod", user, sub)
		}
		refusedBy(t, s.connect(t, user, ns, "pods", "https:waypoint-7d4b9c-x2x4q:15000", "proxy"), "waypoint/exec", "%s: pods/proxy with a scheme and port", user)
		refusedBy(t, s.connect(t, user, ns, "services", "waypoint:15021", "proxy"), "waypoint/exec", "%s: services/proxy", user)
		notTheGuards(t, s.connect(t, user, ns, "services", "web:80", "proxy"), "%s: services/proxy of the member's own Service", user)
	}
}

// Kubernetes' controllers are judged when they create a pod: a webhook may have changed it after
// its template was judged. The ReplicaSet controller's opt-out pod is refused, its plain pod
// admitted.
func TestPodsAreJudgedWhoeverCreatesThem(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := s.namespace(t, "pods-kcm")
	optOut := plainPod(ns, "web-5f7d8-abcde")
	optOut.Labels = map[string]string{"istio.io/dataplane-mode": "none"}
	for _, maker := range []string{rsCtl, kcm} {
		c := s.as(t, maker)
		refusedBy(t, c.Create(ctx, optOut.DeepCopy(), client.DryRunAll), "pods/dataplane-mode-none", "%s creates a pod a webhook opted out", maker)
		require.NoError(t, c.Create(ctx, plainPod(ns, "web-5f7d8-fghij"), client.DryRunAll), "%s creates a plain pod", maker)
	}
	// What the workload's owner reads in the ReplicaSet's FailedCreate event: the pod (the API
	// server names a generateName pod before admission), the check, what to do.
	generated := optOut.DeepCopy()
	generated.Name, generated.GenerateName = "", "web-5f7d8-"
	err := s.as(t, rsCtl).Create(ctx, generated, client.DryRunAll)
	refusedBy(t, err, "pods/dataplane-mode-none")
	require.Regexp(t, `Pod `+ns+`/web-5f7d8-[a-z0-9]{5}: istio.io/dataplane-mode=none takes the pod out of the ambient mesh`, err.Error())
	// Updates of Kubernetes' controllers stay trusted: the garbage collector and others change
	// what they own of pods that may predate the guard.
	require.NoError(t, s.env.Client.Create(ctx, optOut.DeepCopy()), "a pod from before the guard (made by system:masters)")
	old := &corev1.Pod{}
	require.NoError(t, s.env.Client.Get(ctx, client.ObjectKeyFromObject(optOut), old))
	old.Finalizers = []string{"example.com/kept"}
	require.NoError(t, s.as(t, kcm).Update(ctx, old, client.DryRunAll), "kube-controller-manager updates it")
}

// The edges of the waypoint policy (found by the third review): what it must admit and what it must refuse:
// a CNI plugin's status annotation of the waypoint's pods (Calico), the pods of a Gateway the admin
// allows, an HPA on the waypoint's ReplicaSet, and budgets and Services that select the waypoint's
// pods by another of their labels or by none.
func TestWaypointStatusWritesAllowedGatewaysAndOtherSelectors(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := s.namespace(t, "wp-review")
	const calico = "system:serviceaccount:calico-system:calico-cni-plugin"
	fixture.ClusterAdmin(t, s.env.Client, "guard-test-calico", rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: calico})
	pod := waypointPod(ns, "waypoint-7d4b9c-c4l1c")
	require.NoError(t, s.as(t, rsCtl).Create(ctx, pod))
	annotated := pod.DeepCopy()
	annotated.Annotations = map[string]string{"cni.projectcalico.org/podIP": "10.1.2.3/32"}
	require.NoError(t, s.as(t, calico).SubResource("status").Update(ctx, annotated, client.DryRunAll), "Calico annotates the waypoint's pod through its status")
	relabelled := pod.DeepCopy()
	relabelled.Labels["mine"] = "x"
	refusedBy(t, s.as(t, calico).SubResource("status").Update(ctx, relabelled, client.DryRunAll), "waypoint/pods", "but may not change its labels there")
	moved := pod.DeepCopy()
	moved.Status.PodIPs = []corev1.PodIP{{IP: "10.9.9.9"}}
	refusedBy(t, s.as(t, calico).SubResource("status").Update(ctx, moved, client.DryRunAll), "waypoint/pods", "nor its status, where istiod reads its address")
	kept := pod.DeepCopy()
	kept.Finalizers = []string{"example.com/keep"}
	refusedBy(t, s.as(t, calico).SubResource("status").Update(ctx, kept, client.DryRunAll), "waypoint/pods", "nor its finalizers")
	// A pod rendered to look like the waypoint's by another Gateway's Deployment (an allowed
	// Gateway's parametersRef overlay) is not the waypoint ReplicaSet's.
	lookalike := waypointPod(ns, "ingress-istio-5c6d-zzzzz")
	lookalike.OwnerReferences[0].Name = "ingress-istio-5c6d"
	refusedBy(t, s.as(t, rsCtl).Create(ctx, lookalike, client.DryRunAll), "waypoint/pods", "a pod as the waypoint from another ReplicaSet")
	// A Deployment named waypoint-x, made before the guard, names its ReplicaSets waypoint-x-<hash>.
	prefixed := waypointPod(ns, "waypoint-x-6b7c8d-zzzzz")
	prefixed.OwnerReferences[0].Name = "waypoint-x-6b7c8d"
	refusedBy(t, s.as(t, rsCtl).Create(ctx, prefixed, client.DryRunAll), "waypoint/pods", "a pod as the waypoint from a ReplicaSet of a Deployment named waypoint-x")

	ingress := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ingress-istio-5c6d-abcde", Namespace: ns, Labels: map[string]string{
		"gateway.networking.k8s.io/gateway-name": "ingress", "gateway.istio.io/managed": "istio.io-gateway-controller"}},
		Spec: corev1.PodSpec{ServiceAccountName: "ingress-istio", Containers: []corev1.Container{{Name: "istio-proxy", Image: "proxyv2"}}}}
	require.NoError(t, s.as(t, rsCtl).Create(ctx, ingress.DeepCopy(), client.DryRunAll), "the pods of a Gateway guard.meshConfigAllowed names")
	ingress.Labels["gateway.networking.k8s.io/gateway-name"] = "side-door"
	refusedBy(t, s.as(t, rsCtl).Create(ctx, ingress, client.DryRunAll), "waypoint/pods", "but not of one it does not name")

	c := s.as(t, widened)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "waypoint-7d4b9c"}, MinReplicas: ptr.To(int32(20)), MaxReplicas: 20}}
	refusedBy(t, c.Create(ctx, hpa, client.DryRunAll), "waypoint/scaling", "an HPA on the waypoint's ReplicaSet")
	// KServe names a predictor's HPA and Deployment after its InferenceService, which may begin
	// with the waypoint's name.
	kserve := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "waypoint-demo-predictor", Namespace: ns}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "waypoint-demo-predictor"}, MaxReplicas: 3}}
	require.NoError(t, c.Create(ctx, kserve, client.DryRunAll), "an HPA of a Deployment named waypoint-*")
	for name, sel := range map[string]*metav1.LabelSelector{
		"empty":          {},
		"class":          {MatchLabels: map[string]string{"gateway.networking.k8s.io/gateway-class-name": "istio-waypoint"}},
		"canonical-name": {MatchLabels: map[string]string{"service.istio.io/canonical-name": wp}},
		"template-hash":  {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pod-template-hash", Operator: metav1.LabelSelectorOpExists}}},
		// The tenant and webhook reviews of Dec 5: any other label of the waypoint's template, and
		// requirements that only exclude.
		"dataplane-mode": {MatchLabels: map[string]string{"istio.io/dataplane-mode": "none"}},
		"inject":         {MatchLabels: map[string]string{"sidecar.istio.io/inject": "false"}},
		"revision":       {MatchLabels: map[string]string{"service.istio.io/canonical-revision": "latest"}},
		"canonical-in":   {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "service.istio.io/canonical-name", Operator: metav1.LabelSelectorOpIn, Values: []string{wp}}}},
		"does-not-exist": {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist}}},
		// The node's zone, which the API server copies onto every pod it binds (the tenant re-review of Dec 5).
		"zone":   {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: metav1.LabelSelectorOpExists}}},
		"not-in": {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}},
	} {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb-" + name, Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: sel}}
		refusedBy(t, c.Create(ctx, pdb, client.DryRunAll), "waypoint/scaling", "a budget selecting the waypoint's pods by %s", name)
	}
	own := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb-own", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	require.NoError(t, c.Create(ctx, own, client.DryRunAll), "a budget of the member's own pods")
	mirror := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mirror", Namespace: ns}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"service.istio.io/canonical-name": wp}, Ports: []corev1.ServicePort{{Port: 15020}}}}
	refusedBy(t, c.Create(ctx, mirror, client.DryRunAll), "waypoint/service-selectors", "a Service selecting the waypoint's pods by their canonical name")
	mirror.Spec.Selector = map[string]string{"istio.io/dataplane-mode": "none"}
	refusedBy(t, c.Create(ctx, mirror, client.DryRunAll), "waypoint/service-selectors", "a Service selecting the waypoint's pods by their opt-out")
	mirror.Spec.Selector = map[string]string{"topology.kubernetes.io/zone": "zone-a", "service.istio.io/canonical-name": wp}
	refusedBy(t, c.Create(ctx, mirror, client.DryRunAll), "waypoint/service-selectors", "a Service selecting the waypoint's pods by their zone")
	for name, sel := range map[string]map[string]string{
		"own pods":              {"app": "web"},
		"own pods, and Istio's": {"app": "web", "sidecar.istio.io/inject": "false"},
		"another Gateway":       {"gateway.networking.k8s.io/gateway-name": "ingress"},
	} {
		mirror.Spec.Selector = sel
		require.NoError(t, c.Create(ctx, mirror.DeepCopy(), client.DryRunAll), "a Service selecting %s", name)
	}
	for name, sel := range map[string]*metav1.LabelSelector{
		"own pods by expression": {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}},
		"not the waypoint":       {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gateway.networking.k8s.io/gateway-name", Operator: metav1.LabelSelectorOpDoesNotExist}}},
	} {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb-ok", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: sel}}
		require.NoError(t, c.Create(ctx, pdb, client.DryRunAll), "a budget selecting %s", name)
	}
}
