package integration

// The fifth review of Dec 1 (review5), of review4's fixes (cdc609c, 02ee2c9). Each subtest here
// reproduced one finding on the real API server and failed while it stood; all are fixed
// (SECURITY.md, "Fifth review"), so they run in make test.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

// metadataWriter holds the rights each way below needs, and no more: namespace update (the very
// writer the namespace-labels policy is for), namespaces/finalize, and pod create with pods/binding
// (what every custom or batch scheduler holds, and any role with resources "pods/*" or "*").
const metadataWriter = "mel@example.com"

// guardedEnv is a fresh API server with the default (ambient) guard in place, metadataWriter's
// client, and a labelled managed namespace per name, each with the guard seen refusing a plain
// write of a guarded label there.
func guardedEnv(t *testing.T, names ...string) (root, writer client.Client) {
	t.Helper()
	env := envtest.StartFresh(t, 0)
	root = env.Client
	ctx := context.Background()
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metadata-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces/finalize"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "create", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/binding"}, Verbs: []string{"create"}},
	}}))
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metadata-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metadata-writer"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: metadataWriter}}}))
	cfg := config.Default()
	installGuardOf(t, root, cfg)
	writer = as(t, env, metadataWriter)
	for _, name := range names {
		profileIn(t, root, name)
		n := &corev1.Namespace{}
		require.NoError(t, root.Get(ctx, client.ObjectKey{Name: name}, n))
		n.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "istio.io/dataplane-mode": "ambient"}
		require.NoError(t, root.Update(ctx, n), "system:masters is never refused")
		require.Eventually(t, func() bool {
			n := &corev1.Namespace{}
			require.NoError(t, root.Get(ctx, client.ObjectKey{Name: name}, n))
			n.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
			err := writer.Update(ctx, n, client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), guard.NamespaceLabelsPolicy)
		}, 30*time.Second, 200*time.Millisecond, "the guard takes effect and refuses a plain change of enforce")
		require.Error(t, root.Create(ctx, boundPod(name, "privileged-before", true)), "baseline refuses a privileged pod")
	}
	return root, writer
}

// Finding R5-1 (high where anyone but the controller may update namespaces/finalize: R4-2 through
// the other subresource). The namespace-labels policy matches namespaces and namespaces/status
// (guard/guard.go namespaceLabels), not namespaces/finalize, and the API server keeps a finalize
// update's metadata, labels included (k8s.io/kubernetes pkg/registry/core/namespace/strategy.go:
// namespaceFinalizeStrategy.PrepareForUpdate resets only status). A PUT to
// /api/v1/namespaces/<ns>/finalize with enforce=privileged and dataplane-mode=none is admitted,
// and a privileged pod with it until the runner repairs the labels (the pod stays).
//
// Finding R5-2 (high where a namespace writer is not the controller: the case the namespace-labels
// policy exists for). Every policy decides "managed" from the owner annotation (guard.go managed),
// and namespace-labels reads it from oldObject, so no write that drops it is judged: the first
// update removes the annotation (no guarded label changes: admitted), and the second changes every
// guarded label of a namespace that is no longer managed (admitted); pods, workloads, Services and
// the managed objects of that namespace leave the guard with it.
//
// Finding R5-3 (high where anyone but kube-system's and the controller's accounts may create
// pods/binding). The pods policy matches pods and pods/status, not pods/binding (nor the older
// "bindings" resource), and the API server copies a Binding's annotations, and since 1.35 (feature
// PodTopologyLabelsAdmission, beta, on by default) every label of it, onto the pod it binds
// (pkg/registry/core/pod/storage/storage.go setPodNodeAndMetadata, copyLabelsWithOverwriting).
// A pod created as the guard wants (spec.schedulerName naming no scheduler keeps it unbound) is
// bound with istio.io/dataplane-mode=none, a foreign istio.io/use-waypoint and
// sidecar.istio.io/status: Istio's CNI agent reads them when the pod's sandbox starts, so it runs
// outside the mesh and every policy of the namespace.
func TestTheGuardKeepsGuardedMetadataWhateverTheWayOnTheAPIServer(t *testing.T) {
	root, writer := guardedEnv(t, "r5-finalize", "r5-annotation", "r5-binding")
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
		require.NoError(t, root.Get(ctx, client.ObjectKey{Name: "r5-finalize"}, n))
		n.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
		n.Labels["istio.io/dataplane-mode"] = "none"
		t.Logf("finalize update: %v", writer.SubResource("finalize").Update(ctx, n))
		unchanged(t, "r5-finalize", "a namespaces/finalize update")
	})

	t.Run("the owner annotation first", func(t *testing.T) {
		n := &corev1.Namespace{}
		require.NoError(t, root.Get(ctx, client.ObjectKey{Name: "r5-annotation"}, n))
		delete(n.Annotations, ownership.OwnerAnnotation)
		t.Logf("update dropping the owner annotation: %v", writer.Update(ctx, n))
		require.NoError(t, root.Get(ctx, client.ObjectKey{Name: "r5-annotation"}, n))
		n.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
		n.Labels["istio.io/dataplane-mode"] = "none"
		t.Logf("update of the labels: %v", writer.Update(ctx, n))
		unchanged(t, "r5-annotation", "an update that dropped the owner annotation first")
	})

	t.Run("pods/binding", func(t *testing.T) {
		optedOut := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: "r5-binding",
			Labels: map[string]string{"istio.io/dataplane-mode": "none"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}}}
		require.Eventually(t, func() bool {
			err := writer.Create(ctx, optedOut.DeepCopy(), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), guard.PodsPolicy)
		}, 30*time.Second, 200*time.Millisecond, "the guard refuses a pod created opted out")

		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bound-later", Namespace: "r5-binding"},
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
