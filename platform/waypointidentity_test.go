package platform_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/platform"
)

// waypointNamespace is a managed namespace with istiod's waypoint as istiod and
// kube-controller-manager leave it: the Gateway, istiod's applied Deployment (owned by the
// Gateway), its ReplicaSet and one pod of it, and istiod's ServiceAccount.
type waypointNamespace struct {
	ns  string
	rs  *appsv1.ReplicaSet
	pod *corev1.Pod
}

var waypointTemplate = corev1.PodTemplateSpec{
	ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		"gateway.networking.k8s.io/gateway-name": "waypoint", "gateway.istio.io/managed": "istio.io-mesh-controller"}},
	Spec: corev1.PodSpec{ServiceAccountName: "waypoint", Containers: []corev1.Container{{Name: "istio-proxy", Image: "istio/proxyv2:1.30.3"}}},
}

func istiodsWaypoint(t *testing.T, c client.Client, ns string) waypointNamespace {
	t.Helper()
	return istiodsWaypointAs(t, c, ns, "istio.io/gateway-controller")
}

// istiodsWaypointAs is istiodsWaypoint with istiod applying as the field manager manager (its
// PILOT_GATEWAY_API_CONTROLLER_NAME).
func istiodsWaypointAs(t *testing.T, c client.Client, ns, manager string) waypointNamespace {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{ownership.OwnerAnnotation: ns + "@example.com"}}}))
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waypoint"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "istio-waypoint",
			Listeners: []gatewayv1.Listener{{Name: "mesh", Port: 15008, Protocol: "HBONE"}}}}
	require.NoError(t, c.Create(ctx, gw))
	istiod := []client.ApplyOption{client.FieldOwner(manager), client.ForceOwnership}
	owner := []any{map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "waypoint", "uid": string(gw.UID)}}
	managed := map[string]any{"gateway.istio.io/managed": "istio.io-mesh-controller"}
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&waypointTemplate)
	require.NoError(t, err)
	dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": ns, "name": "waypoint", "labels": managed, "ownerReferences": owner},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"gateway.networking.k8s.io/gateway-name": "waypoint"}}, "template": tmpl}}}
	require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(dep), istiod...))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(dep), dep))
	sa := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"namespace": ns, "name": "waypoint", "labels": managed, "ownerReferences": owner}}}
	require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(sa), istiod...))
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waypoint-5d8f9", Labels: waypointTemplate.Labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "waypoint", UID: dep.GetUID(), Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"gateway.networking.k8s.io/gateway-name": "waypoint"}},
			Template: waypointTemplate}}
	require.NoError(t, c.Create(ctx, rs, client.FieldOwner("kube-controller-manager")))
	pod := podOf(ns, "waypoint-5d8f9-x7k2p", rs, waypointTemplate.Spec)
	require.NoError(t, c.Create(ctx, pod, client.FieldOwner("kube-controller-manager")))
	return waypointNamespace{ns: ns, rs: rs, pod: pod}
}

// podOf is a pod of the ReplicaSet rs (none when nil) with the waypoint's labels and spec.
func podOf(ns, name string, rs *appsv1.ReplicaSet, spec corev1.PodSpec) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: waypointTemplate.Labels}, Spec: *spec.DeepCopy()}
	if rs != nil {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	}
	return p
}

// identityFindings are the findings of kind WaypointIdentityShared in namespaces, by namespace and
// object, and the whole report.
func identityFindings(t *testing.T, c client.Reader, namespaces ...string) (map[string]string, platform.Report) {
	t.Helper()
	cfg := config.Default()
	require.NoError(t, cfg.Validate())
	report, err := platform.Check(context.Background(), c, cfg)
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range ofNamespaces(report.Findings, namespaces...) {
		if f.Kind == platform.FindingWaypointIdentityShared {
			out[f.Namespace+" "+f.What] = f.Problem
			assert.Contains(t, f.Fix, "guard.breakGlassGroup", "the fix says who may delete it")
		}
	}
	return out, report
}

// whatCouldRunNamespaces are the namespaces of TestCheckReportsWhatCouldRunAsTheWaypoint.
var whatCouldRunNamespaces = []string{"wi-clean", "wi-tainted", "wi-extended", "wi-reapplied", "wi-restarted", "wi-platform"}

// What a member made before the guard was installed, and could run as the waypoint or pass as its
// pods, is reported, each naming the object; istiod's own waypoint is not, nor the same objects
// in a namespace no Profile owns.
func TestCheckReportsWhatCouldRunAsTheWaypoint(t *testing.T) {
	t.Parallel()
	env := envtest.StartNamed(t, ownNamespaces)
	c, ctx := env.Client, context.Background()
	require.NoError(t, c.Create(ctx, fixture.PodDefaultCRD()))
	require.Eventually(t, func() bool {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("kubeflow.org/v1alpha1")
		l.SetKind("PodDefaultList")
		return c.List(ctx, l) == nil
	}, 30*time.Second, 200*time.Millisecond, "the PodDefault CRD is served")

	istiodsWaypoint(t, c, "wi-clean")
	got, _ := identityFindings(t, c, whatCouldRunNamespaces...)
	require.Empty(t, got, "istiod's own waypoint is nothing to report")

	tainted := istiodsWaypoint(t, c, "wi-tainted")
	// Before the guard: a member's pod running as the waypoint, a ReplicaSet named like istiod's,
	// a pod with a container of their own under istiod's ReplicaSet, a token Secret, PodDefaults.
	require.NoError(t, c.Create(ctx, podOf(tainted.ns, "impostor", nil, waypointTemplate.Spec)))
	// Owned by a member's Deployment named like the waypoint's, which would make it again.
	rogue := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: tainted.ns, Name: "waypoint-rogue",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "waypoint-x", UID: "0f1e2d3c", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rogue"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rogue"}}, Spec: waypointTemplate.Spec}}}
	require.NoError(t, c.Create(ctx, rogue, client.FieldOwner("kube-controller-manager")))
	// Under istiod's untouched waypoint, a pod of its ReplicaSet with a container of a member's.
	extended := istiodsWaypoint(t, c, "wi-extended")
	extra := waypointTemplate.Spec.DeepCopy()
	extra.Containers = append(extra.Containers, corev1.Container{Name: "shell", Image: "busybox"})
	require.NoError(t, c.Create(ctx, podOf(extended.ns, "waypoint-5d8f9-extra", extended.rs, *extra)))
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tainted.ns, Name: "waypoint-token",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "waypoint"}}, Type: corev1.SecretTypeServiceAccountToken}))
	for name, spec := range map[string]map[string]any{
		"selects-waypoint": {"selector": map[string]any{"matchLabels": map[string]any{"gateway.networking.k8s.io/gateway-name": "waypoint"}}},
		"selects-all":      {"selector": map[string]any{}},
		"as-waypoint":      {"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}, "serviceAccountName": "waypoint"},
		"selects-own-pods": {"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
	} {
		require.NoError(t, c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
			"metadata": map[string]any{"namespace": tainted.ns, "name": name}, "spec": spec}}))
	}
	// A member's edit of istiod's Deployment (an Update, not istiod's apply) adds a container.
	dep := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: tainted.ns, Name: "waypoint"}, dep))
	dep.Spec.Template.Spec.Containers = append(dep.Spec.Template.Spec.Containers, corev1.Container{Name: "shell", Image: "busybox"})
	require.NoError(t, c.Update(ctx, dep, client.FieldOwner("kubectl-edit")))
	// A second apply that sets istiod's label and a spec field: two writers of the spec, so which
	// is istiod's is unknown. And a label a member's Update put on istiod's ServiceAccount.
	reapplied := istiodsWaypoint(t, c, "wi-reapplied")
	fixture.ApplyAs(t, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: reapplied.ns, Name: "waypoint"}}, "member-apply", func(o map[string]any) {
		o["metadata"] = map[string]any{"name": "waypoint", "namespace": reapplied.ns, "labels": map[string]any{"gateway.istio.io/managed": "istio.io-mesh-controller"}}
		o["spec"] = map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"sidecar.istio.io/bootstrapOverride": "members"}}}}
	})
	sa := &corev1.ServiceAccount{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: reapplied.ns, Name: "waypoint"}, sa))
	sa.Labels["team"] = "a"
	require.NoError(t, c.Update(ctx, sa, client.FieldOwner("kubectl-label")))
	// kubectl-rollout's restartedAt is istiod's Deployment's still, but not another field it sets.
	restarted := istiodsWaypoint(t, c, "wi-restarted")
	patchTemplateAnnotations(t, c, restarted.ns, "kubectl-rollout", map[string]string{
		"kubectl.kubernetes.io/restartedAt": "2026-08-01T10:00:00Z", "proxy.istio.io/config": `{"proxyMetadata":{"X":"1"}}`})
	// The same impostor in a namespace no Profile owns is not the plugins' business.
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wi-platform"}}))
	require.NoError(t, c.Create(ctx, podOf("wi-platform", "impostor", nil, waypointTemplate.Spec)))

	got, report := identityFindings(t, c, whatCouldRunNamespaces...)
	want := []string{"Pod/impostor", "ReplicaSet/waypoint-rogue", "Deployment/waypoint-x", "Secret/waypoint-token",
		"PodDefault/selects-waypoint", "PodDefault/selects-all", "PodDefault/as-waypoint", "Deployment/waypoint",
		// Under a Deployment that is not istiod's alone, its ReplicaSet and pods are not either.
		"ReplicaSet/waypoint-5d8f9", "Pod/waypoint-5d8f9-x7k2p"}
	var keys []string
	for _, w := range want {
		keys = append(keys, tainted.ns+" "+w)
	}
	keys = append(keys, extended.ns+" Pod/waypoint-5d8f9-extra")
	for _, w := range []waypointNamespace{reapplied, restarted} {
		keys = append(keys, w.ns+" Deployment/waypoint", w.ns+" ReplicaSet/waypoint-5d8f9", w.ns+" Pod/waypoint-5d8f9-x7k2p")
	}
	keys = append(keys, reapplied.ns+" ServiceAccount/waypoint")
	gotKeys := make([]string, 0, len(got))
	for k := range got {
		gotKeys = append(gotKeys, k)
	}
	assert.ElementsMatch(t, keys, gotKeys)
	assert.Contains(t, got[tainted.ns+" Deployment/waypoint"], "kubectl-edit (Update)", "the finding names who wrote the spec")
	assert.Contains(t, got[reapplied.ns+" Deployment/waypoint"], "member-apply (Apply)")
	assert.Contains(t, got[restarted.ns+" Deployment/waypoint"], "kubectl-rollout (Update)")
	assert.Empty(t, report.NotChecked, "an admin may list Secrets")

	// A reader that may not list Secrets (the controller's role) says so, and still reports the rest.
	restricted := readerWithout(t, env, "secrets")
	got, report = identityFindings(t, restricted, whatCouldRunNamespaces...)
	assert.NotContains(t, got, tainted.ns+" Secret/waypoint-token")
	assert.Contains(t, got, tainted.ns+" Pod/impostor")
	require.Len(t, report.NotChecked, 1)
	assert.Contains(t, report.NotChecked[0], "profile-plugins check")
}

// readerWithout is a client of a user who may read everything but the given core resource.
func readerWithout(t *testing.T, env *envtest.Env, resource string) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reads-all-but-" + resource}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}}}}
	// RBAC only adds, so everything but resource is spelled out for the core group.
	role.Rules[0].APIGroups = []string{"apps", "gateway.networking.k8s.io", "kubeflow.org", "admissionregistration.k8s.io", "security.istio.io",
		"networking.istio.io", "extensions.istio.io"}
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "serviceaccounts", "configmaps"}, Verbs: []string{"get", "list"}})
	require.NoError(t, env.Client.Create(ctx, role))
	user := "platform-reader"
	require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, RoleRef: rbacv1.RoleRef{
		APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user}}}))
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	require.NoError(t, err)
	return c
}

// A pod that claims istiod's ReplicaSet as its controller (any writer of pods may set that
// reference) and has the template's container name and image passes only if it runs what the
// template says: each other program, environment, mount, security context or volume is reported
// (review admin5, A5-1). istiod's own pod, which the API server defaults and gives its token
// volume, is not.
func TestCheckReportsPodsOfIstiodsReplicaSetThatRunAnythingButItsTemplate(t *testing.T) {
	t.Parallel()
	env := envtest.StartNamed(t, ownNamespaces)
	c, ctx := env.Client, context.Background()
	wp := istiodsWaypoint(t, c, "wi-forged")
	member := corev1.Volume{Name: "member", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "members-bootstrap"}}}}
	forgeries := map[string]func(*corev1.PodSpec){
		"command": func(s *corev1.PodSpec) {
			s.Containers[0].Command = []string{"/bin/sh", "-c", "exec envoy -c /member/bootstrap.yaml"}
		},
		"args": func(s *corev1.PodSpec) {
			s.Containers[0].Args = []string{"proxy", "router", "--log_output_level=all:debug"}
		},
		"env": func(s *corev1.PodSpec) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "ISTIO_BOOTSTRAP_OVERRIDE", Value: "/member/bootstrap.yaml"}}
		},
		"envfrom": func(s *corev1.PodSpec) {
			s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: member.ConfigMap.LocalObjectReference}}}
		},
		"mount": func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{member}
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "member", MountPath: "/etc/istio/custom-bootstrap"}}
		},
		"volume": func(s *corev1.PodSpec) { s.Volumes = []corev1.Volume{member} },
		"privileged": func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		},
		"init": func(s *corev1.PodSpec) { s.InitContainers = []corev1.Container{{Name: "prepare", Image: "busybox"}} },
		// Named like the token volume, but projecting the member's ConfigMap.
		"token-lookalike": func(s *corev1.PodSpec) {
			withAdmittedToken(s)
			s.Volumes[0].Projected.Sources[1].ConfigMap.Name = "members-bootstrap"
		},
	}
	for name, forge := range forgeries {
		spec := waypointTemplate.Spec.DeepCopy()
		forge(spec)
		require.NoError(t, c.Create(ctx, podOf(wp.ns, "waypoint-5d8f9-"+name, wp.rs, *spec)), name)
	}
	// The test API server runs no ServiceAccount admission plugin: a pod as a cluster's has it.
	admitted := waypointTemplate.Spec.DeepCopy()
	withAdmittedToken(admitted)
	admitted.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	require.NoError(t, c.Create(ctx, podOf(wp.ns, "waypoint-5d8f9-admitted", wp.rs, *admitted)))
	got, _ := identityFindings(t, c, wp.ns)
	assert.NotContains(t, got, wp.ns+" Pod/"+wp.pod.Name, "istiod's own pod, defaulted, is its template's")
	assert.NotContains(t, got, wp.ns+" Pod/waypoint-5d8f9-admitted", "nor with the token volume and requests its admission gave it")
	for name := range forgeries {
		assert.Contains(t, got, wp.ns+" Pod/waypoint-5d8f9-"+name, "a pod of istiod's ReplicaSet with its own %s", name)
	}
	assert.Len(t, got, len(forgeries), "nothing else is reported")
	assert.Contains(t, got[wp.ns+" Pod/waypoint-5d8f9-command"], "container istio-proxy: command", "the finding names what differs")
	assert.Contains(t, got[wp.ns+" Pod/waypoint-5d8f9-volume"], "volumes")
}

// A pod that runs as the waypoint and is being deleted is reported: it runs, and its token stays
// valid, until the grace period its deleter chose ends (review admin5, A5-1). istiod's own
// terminating pod is not.
func TestCheckReportsTerminatingPodsThatRunAsTheWaypoint(t *testing.T) {
	t.Parallel()
	env := envtest.StartNamed(t, ownNamespaces)
	c, ctx := env.Client, context.Background()
	wp := istiodsWaypoint(t, c, "wi-lingering")
	const year = 365 * 24 * 3600
	lingering := podOf(wp.ns, "lingering", nil, waypointTemplate.Spec)
	for _, p := range []*corev1.Pod{lingering, wp.pod} {
		if p == lingering {
			require.NoError(t, c.Create(ctx, p))
		}
		// A pod bound to a node stays until its kubelet confirms the deletion.
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(p), p))
		p.Spec.NodeName = "node-1"
		require.NoError(t, c.SubResource("binding").Create(ctx, p, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}))
		require.NoError(t, c.Delete(ctx, p, client.GracePeriodSeconds(year)))
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(p), p))
		require.NotNil(t, p.DeletionTimestamp, "%s is terminating", p.Name)
	}
	got, report := identityFindings(t, c, wp.ns)
	require.Contains(t, got, wp.ns+" Pod/lingering")
	for _, f := range report.Findings {
		if f.What == "Pod/lingering" {
			assert.Contains(t, f.Fix, "--grace-period=1", "the fix says how to end it sooner")
		}
	}
	assert.NotContains(t, got, wp.ns+" Pod/"+wp.pod.Name, "istiod's own terminating pod is its template's")
	assert.Len(t, got, 1)
}

// withAdmittedToken adds to s the volume and mount the ServiceAccount admission plugin adds to a
// pod (plugin/pkg/admission/serviceaccount, TokenVolumeSource).
func withAdmittedToken(s *corev1.PodSpec) {
	s.Volumes = append(s.Volumes, corev1.Volume{Name: "kube-api-access-7xq2m", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}})
	for i := range s.Containers {
		s.Containers[i].VolumeMounts = append(s.Containers[i].VolumeMounts, corev1.VolumeMount{
			Name: "kube-api-access-7xq2m", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"})
	}
}

// patchTemplateAnnotations patches, as the field manager manager, annotations onto the pod
// template of the namespace's waypoint Deployment, as `kubectl rollout restart` does.
func patchTemplateAnnotations(t *testing.T, c client.Client, ns, manager string, annotations map[string]string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": annotations}}}})
	require.NoError(t, err)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waypoint"}}
	require.NoError(t, c.Patch(context.Background(), dep, client.RawPatch(types.StrategicMergePatchType, patch), client.FieldOwner(manager)))
}

// istiod's own waypoint is not reported after what admins and istiod routinely do to it: an HPA's
// scaling (the scale subresource), `kubectl rollout restart` (the restartedAt annotation, owned by
// kubectl-rollout), and istiod applying under another field manager (PILOT_GATEWAY_API_CONTROLLER_NAME)
// (review admin5, A5-2).
func TestCheckTakesIstiodsWaypointAfterScalingRestartsAndUnderAnyControllerName(t *testing.T) {
	t.Parallel()
	env := envtest.StartNamed(t, ownNamespaces)
	c, ctx := env.Client, context.Background()

	scaled := istiodsWaypoint(t, c, "wi-scaled")
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: scaled.ns, Name: "waypoint"}}
	require.NoError(t, c.SubResource("scale").Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)),
		client.FieldOwner("kube-controller-manager")))
	restarted := istiodsWaypoint(t, c, "wi-restarted-twice")
	patchTemplateAnnotations(t, c, restarted.ns, "kubectl-rollout", map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-08-01T10:00:00Z"})
	// A second restart, and istiod's apply after it, keep it istiod's.
	patchTemplateAnnotations(t, c, restarted.ns, "kubectl-rollout", map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-08-02T10:00:00Z"})
	istiodsWaypointAs(t, c, "wi-custom", "example.com/gateway-controller")

	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: restarted.ns, Name: "waypoint"}, dep))
	require.True(t, slices.ContainsFunc(dep.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "kubectl-rollout" }),
		"kubectl-rollout owns a field of the spec")
	got, _ := identityFindings(t, c, scaled.ns, restarted.ns, "wi-custom")
	assert.Empty(t, got)
}
