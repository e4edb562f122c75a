package guard_test

// Guarded metadata on the real API server, whatever the way a write takes: a namespace's finalize
// subresource, an update that drops the owner annotation first, a pod's Binding or status
// subresource; and the exceptions to the opt-out refusals (guard.optOutAllowed, istiod's waypoint).

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

// metadataWriter holds the rights each way below needs, and no more: namespace update (the very
// writer the namespace-labels policy is for), namespaces/finalize, and pod create with pods/binding
// (what every custom or batch scheduler holds, and any role with resources "pods/*" or "*").
const metadataWriter = "mel@example.com"

// metadataNamespaces returns the package's server with the default (ambient) guard, root's and
// metadataWriter's clients, and a labelled managed namespace per prefix, each with the guard seen
// refusing a plain write of a guarded label there.
func metadataNamespaces(t *testing.T, prefixes ...string) (root, writer client.Client, names []string) {
	t.Helper()
	s := guarded(t)
	root = s.env.Client
	ctx := context.Background()
	createIfAbsent(t, root, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "guard-test-metadata-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces/finalize"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "create", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/binding"}, Verbs: []string{"create"}},
	}})
	createIfAbsent(t, root, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "guard-test-metadata-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "guard-test-metadata-writer"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: metadataWriter}}})
	writer = s.as(t, metadataWriter)
	for _, prefix := range prefixes {
		name := profileNamespace(t, s, prefix)
		names = append(names, name)
		labelNamespace(t, s, name, map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "istio.io/dataplane-mode": "ambient"})
		require.Eventually(t, func() bool {
			n := &corev1.Namespace{}
			require.NoError(t, root.Get(ctx, client.ObjectKey{Name: name}, n))
			n.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
			err := writer.Update(ctx, n, client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), guard.NamespaceLabelsPolicy)
		}, 30*time.Second, 200*time.Millisecond, "the guard takes effect and refuses a plain change of enforce")
		require.Error(t, root.Create(ctx, boundPod(name, "privileged-before", true)), "baseline refuses a privileged pod")
	}
	return root, writer, names
}

// What the fifth review found (review R5-1, R5-2, R5-3, docs/security/reviews.md):
//
// R5-1 (high where anyone but the controller may update namespaces/finalize: R4-2 through
// the other subresource). The namespace-labels policy matches namespaces and namespaces/status
// (namespaceLabels), not namespaces/finalize, and the API server keeps a finalize
// update's metadata, labels included (k8s.io/kubernetes pkg/registry/core/namespace/strategy.go:
// namespaceFinalizeStrategy.PrepareForUpdate resets only status). A PUT to
// /api/v1/namespaces/<ns>/finalize with enforce=privileged and dataplane-mode=none is admitted,
// and a privileged pod with it until the runner repairs the labels (the pod stays).
//
// R5-2 (high where a namespace writer is not the controller: the case the namespace-labels
// policy exists for). Every policy decides "managed" from the owner annotation (managed),
// and namespace-labels reads it from oldObject, so no write that drops it is judged: the first
// update removes the annotation (no guarded label changes: admitted), and the second changes every
// guarded label of a namespace that is no longer managed (admitted); pods, workloads, Services and
// the managed objects of that namespace leave the guard with it.
//
// R5-3 (high where anyone but kube-system's and the controller's accounts may create
// pods/binding). The pods policy matches pods and pods/status, not pods/binding (nor the older
// "bindings" resource), and the API server copies a Binding's annotations, and since 1.35 (feature
// PodTopologyLabelsAdmission, beta, on by default) every label of it, onto the pod it binds
// (pkg/registry/core/pod/storage/storage.go setPodNodeAndMetadata, copyLabelsWithOverwriting).
// A pod created as the guard wants (spec.schedulerName naming no scheduler keeps it unbound) is
// bound with istio.io/dataplane-mode=none, a foreign istio.io/use-waypoint and
// sidecar.istio.io/status: Istio's CNI agent reads them when the pod's sandbox starts, so it runs
// outside the mesh and every policy of the namespace.
func TestGuardedMetadataKeptWhateverTheWay(t *testing.T) {
	t.Parallel()
	root, writer, names := metadataNamespaces(t, "finalize", "owner-annotation", "binding")
	finalize, annotation, binding := names[0], names[1], names[2]
	ctx := context.Background()
	unchanged := func(t *testing.T, ns, how string) {
		t.Helper()
		after := namespaceLabels(t, root, ns)
		t.Logf("labels after %s: %v", how, after)
		assert.Equal(t, "baseline", after["pod-security.kubernetes.io/enforce"], "enforce changed %s", how)
		assert.Equal(t, "ambient", after["istio.io/dataplane-mode"], "dataplane-mode changed %s", how)
		assert.Error(t, root.Create(ctx, boundPod(ns, "privileged-after", true)), "a privileged pod is admitted after %s", how)
	}

	t.Run("namespaces/finalize", func(t *testing.T) {
		n := &corev1.Namespace{}
		require.NoError(t, root.Get(ctx, client.ObjectKey{Name: finalize}, n))
		n.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
		n.Labels["istio.io/dataplane-mode"] = "none"
		t.Logf("finalize update: %v", writer.SubResource("finalize").Update(ctx, n))
		unchanged(t, finalize, "a namespaces/finalize update")
	})

	t.Run("the owner annotation first", func(t *testing.T) {
		n := &corev1.Namespace{}
		require.NoError(t, root.Get(ctx, client.ObjectKey{Name: annotation}, n))
		delete(n.Annotations, ownership.OwnerAnnotation)
		t.Logf("update dropping the owner annotation: %v", writer.Update(ctx, n))
		require.NoError(t, root.Get(ctx, client.ObjectKey{Name: annotation}, n))
		n.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
		n.Labels["istio.io/dataplane-mode"] = "none"
		t.Logf("update of the labels: %v", writer.Update(ctx, n))
		unchanged(t, annotation, "an update that dropped the owner annotation first")
	})

	t.Run("pods/binding", func(t *testing.T) {
		optedOut := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: binding,
			Labels: map[string]string{"istio.io/dataplane-mode": "none"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}}}
		require.Eventually(t, func() bool {
			err := writer.Create(ctx, optedOut.DeepCopy(), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), guard.PodsPolicy)
		}, 30*time.Second, 200*time.Millisecond, "the guard refuses a pod created opted out")

		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bound-later", Namespace: binding},
			Spec: corev1.PodSpec{SchedulerName: "nobody", Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}}}
		require.NoError(t, writer.Create(ctx, pod), "a pod the guard has nothing against")
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace,
			Labels:      map[string]string{"istio.io/dataplane-mode": "none", "istio.io/use-waypoint": "elsewhere"},
			Annotations: map[string]string{"sidecar.istio.io/status": `{"containers":["istio-proxy"]}`}},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
		// Each policy takes effect on its own, some time after it is created: wait for this one
		// with dry runs, which bind nothing.
		require.Eventually(t, func() bool {
			err := writer.SubResource("binding").Create(ctx, pod, b.DeepCopy(), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), guard.BindingsPolicy)
		}, 30*time.Second, 200*time.Millisecond, "the guard refuses a Binding carrying Istio's metadata")
		t.Logf("binding: %v", writer.SubResource("binding").Create(ctx, pod, b))
		got := &corev1.Pod{}
		require.NoError(t, root.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Name}, got))
		t.Logf("pod after the binding: node %q labels %v annotations %v", got.Spec.NodeName, got.Labels, got.Annotations)
		assert.NotEqual(t, "none", got.Labels["istio.io/dataplane-mode"], "the binding opted the pod out of the ambient mesh")
		assert.NotContains(t, got.Labels, "istio.io/use-waypoint", "the binding pointed the pod at a foreign waypoint")
		assert.NotContains(t, got.Annotations, "sidecar.istio.io/status", "the binding gave the pod sidecar.istio.io/status without an istio-proxy container")
	})
}

// The status subresource of a pod takes label changes too (only the spec is kept), so the guard
// matches pods/status: a status write that adds istio.io/dataplane-mode=none is refused like any
// other update, and one that changes no label or annotation passes, also for a pod that opted
// out before the guard (an admin's, here), so the kubelet keeps reporting its status.
func TestPodStatusLabelsJudged(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	root := s.env.Client
	ctx := context.Background()
	createIfAbsent(t, root, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "guard-test-pod-status-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/status"}, Verbs: []string{"get", "update", "patch"}},
	}})
	createIfAbsent(t, root, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "guard-test-node-agent-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "guard-test-pod-status-writer"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "node-agent"}}})
	ns := profileNamespace(t, s, "pod-status")
	legacy := boundPod(ns, "opted-out-before", false)
	legacy.Labels = map[string]string{"istio.io/dataplane-mode": "none"}
	require.NoError(t, root.Create(ctx, legacy), "system:masters is never refused")
	require.NoError(t, root.Create(ctx, boundPod(ns, "meshed", false)))
	agent := s.as(t, "node-agent")

	optOut := func() error {
		pod := &corev1.Pod{}
		require.NoError(t, root.Get(ctx, client.ObjectKey{Namespace: ns, Name: "meshed"}, pod))
		pod.Labels = map[string]string{"istio.io/dataplane-mode": "none"}
		return agent.Status().Update(ctx, pod, client.DryRunAll)
	}
	awaitRefusal(t, optOut, guard.PodsPolicy, "a status write that opts the pod out of the mesh is refused")
	guardDenied(t, optOut(), guard.PodsPolicy, "istio.io/dataplane-mode=none")

	pod := &corev1.Pod{}
	require.NoError(t, root.Get(ctx, client.ObjectKey{Namespace: ns, Name: "opted-out-before"}, pod))
	pod.Status.Phase = corev1.PodRunning
	require.NoError(t, agent.Status().Update(ctx, pod), "a status write that changes no metadata passes, whatever the pod's labels")
	require.NoError(t, root.Get(ctx, client.ObjectKey{Namespace: ns, Name: "opted-out-before"}, pod))
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
}

// In sidecar mode the guard refuses sidecar.istio.io/inject=false, as label or annotation, except
// for the pods guard.optOutAllowed names; workloads istiod makes (the waypoint's pods carry
// istio.io/dataplane-mode=none) are admitted in ambient mode.
func TestOptOutAllowedAndIstiodsWaypoint(t *testing.T) {
	t.Parallel()
	pod := func(ns, name, sa string, labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	}
	ctx := context.Background()
	t.Run("sidecar", func(t *testing.T) {
		s := sidecarGuarded(t)
		ns := optOutAllowedNamespace
		createIfAbsent(t, s.env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}})
		tenant := member(t, s, ns, "kubeflow-edit", nil)
		off := map[string]string{"sidecar.istio.io/inject": "false"}
		awaitRefusal(t, func() error { return tenant.Create(ctx, pod(ns, "probe", "", off, nil), client.DryRunAll) }, guard.PodsPolicy, "the guard takes effect")
		guardDenied(t, tenant.Create(ctx, pod(ns, "label", "", off, nil), client.DryRunAll), guard.PodsPolicy, "sidecar.istio.io/inject other than 'true' runs the pod without a sidecar")
		guardDenied(t, tenant.Create(ctx, pod(ns, "annotation", "", nil, off), client.DryRunAll), guard.PodsPolicy, "sidecar.istio.io/inject other than")
		require.NoError(t, tenant.Create(ctx, pod(ns, "allowed", "pipeline-runner", nil, off), client.DryRunAll), "guard.optOutAllowed admits it")
		injected := pod(ns, "ambient-label", "", map[string]string{"istio.io/dataplane-mode": "none"}, map[string]string{"sidecar.istio.io/status": `{"containers":["istio-proxy"]}`})
		injected.Spec.Containers = append(injected.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "proxyv2", Args: []string{"proxy", "sidecar"}})
		require.NoError(t, tenant.Create(ctx, injected, client.DryRunAll), "ambient's opt-out label means nothing to an injected pod in sidecar mode and is not refused")
	})

	// Ambient mode: istiod's waypoint Deployment (its pods labelled dataplane-mode=none) is admitted.
	t.Run("ambient", func(t *testing.T) {
		s := guarded(t)
		ns := s.namespace(t, "istiods-waypoint")
		tenant := s.as(t, editor)
		waypointDeployment := func() *appsv1.Deployment {
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "waypoint", Namespace: ns}, Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"gateway.networking.k8s.io/gateway-name": "waypoint"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
					"gateway.networking.k8s.io/gateway-name": "waypoint", "istio.io/dataplane-mode": "none"}},
					Spec: pod("", "", "waypoint", nil, nil).Spec}}}
		}
		require.Eventually(t, func() bool {
			err := tenant.Create(ctx, waypointDeployment(), client.DryRunAll)
			// The workloads policy (its template opts out) or the waypoint policy (istiod's name and
			// labels), whichever the API server reports first.
			return err != nil && (strings.Contains(err.Error(), "istio.io/dataplane-mode=none") || strings.Contains(err.Error(), "[waypoint/"))
		}, 30*time.Second, 200*time.Millisecond, "the ambient guard takes effect and refuses the tenant's copy")
		require.NoError(t, s.as(t, istiod).Create(ctx, waypointDeployment(), client.DryRunAll), "istiod makes the waypoint Deployment")
	})
}
