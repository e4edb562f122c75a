package guard_test

// The Spark operator's SparkApplications, and the pods its webhook makes of them, on the real API
// server.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/guard"
)

// The labels by which the Spark operator's pod webhook selects a pod and finds its SparkApplication
// (kubeflow/spark-operator pkg/common/label.go).
const (
	sparkLaunchedLabel = "sparkoperator.k8s.io/launched-by-spark-operator"
	sparkAppNameLabel  = "sparkoperator.k8s.io/app-name"
	sparkRoleLabel     = "spark-role"
)

// sparkCRD is the CRD of the Spark operator's kind (sparkoperator.k8s.io/v1beta2) with an open spec.
func sparkCRD(kind, plural string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + ".sparkoperator.k8s.io",
			// As the operator's own CRD: sparkoperator.k8s.io is a protected group.
			"annotations": map[string]any{"api-approved.kubernetes.io": "https://github.com/kubeflow/spark-operator/pull/1298"}},
		"spec": map[string]any{"group": "sparkoperator.k8s.io", "scope": "Namespaced",
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
			"versions": []any{map[string]any{"name": "v1beta2", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}},
	}}
}

// sparkApplication is a SparkApplication whose role ("driver" or "executor") spec has containers
// in field ("initContainers" or "sidecars").
func sparkApplication(ns, name, role, field string, containers ...map[string]any) *unstructured.Unstructured {
	var list []any
	for _, c := range containers {
		list = append(list, c)
	}
	roleSpec := map[string]any{"cores": int64(1), "memory": "512m"}
	if len(list) > 0 {
		roleSpec[field] = list
	}
	spec := map[string]any{"type": "Scala", "mode": "cluster", "image": "registry.example.com/spark:3.5",
		"mainClass": "org.example.Main", "mainApplicationFile": "local:///opt/app.jar", "sparkVersion": "3.5.0",
		"driver": map[string]any{"cores": int64(1), "memory": "512m"}, "executor": map[string]any{"cores": int64(1), "memory": "512m", "instances": int64(1)}}
	spec[role] = roleSpec
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
}

// sparkDeployment is a Deployment whose clean pod template carries the labels that make the Spark
// operator's webhook treat its pods as app's pods in role.
func sparkDeployment(ns, name, app, role string) *appsv1.Deployment {
	labels := map[string]string{"app": name, sparkLaunchedLabel: "true", sparkAppNameLabel: app, sparkRoleLabel: role}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "spark-kubernetes-" + role, Image: "registry.example.com/server:1"}}},
			},
		},
	}
}

// The Spark operator's pod webhook (kubeflow/spark-operator
// internal/webhook/sparkpod_defaulter.go SparkPodDefaulter.Default, mutateSparkPod; registered by
// kubeflow/manifests applications/spark/spark-operator/base/resources.yaml with objectSelector
// sparkoperator.k8s.io/launched-by-spark-operator=true in every namespace) looks up the
// SparkApplication named by the pod's label sparkoperator.k8s.io/app-name and appends its
// spec.driver (or spec.executor) initContainers and sidecars to the pod, whoever creates it. A
// kubeflow-edit member may put those labels on a Deployment's pod template, whose pods the
// replicaset controller creates (trusted): in sidecar mode a SparkApplication with a container
// named istio-init then puts it on a pod the guard never sees, and istio-cni skips the pod's
// redirect (istio/istio cni/pkg/plugin/plugin.go doAddRun). So a SparkApplication (or the template
// of a ScheduledSparkApplication) whose driver or executor has an init container or sidecar named
// istio-proxy, istio-init or istio-validation is refused in a managed namespace (review R12-1,
// docs/security/reviews.md; sparkCheck). kubeflow-edit writes SparkApplications
// (kubeflow-spark-edit) and Deployments (kubeflow-kubernetes-edit).
func TestSparkIstioContainersRefused(t *testing.T) {
	t.Parallel()
	s := sidecarGuarded(t)
	ctx := context.Background()
	ns := profileNamespace(t, s, "spark")
	member := crdMember(t, s, ns, sparkCRD("SparkApplication", "sparkapplications"), "sparkoperator.k8s.io/v1beta2", "SparkApplicationList", "guard-test-kubeflow-edit-spark", []rbacv1.PolicyRule{
		{APIGroups: []string{"sparkoperator.k8s.io"}, Resources: []string{"sparkapplications", "scheduledsparkapplications"},
			Verbs: []string{"get", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "create", "update", "patch", "delete"}}})
	installCRD(t, s, ns, sparkCRD("ScheduledSparkApplication", "scheduledsparkapplications"), "sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplicationList")

	// Why the application is where the guard must refuse: the pod the webhook makes of such a
	// Deployment's pod (injected by Istio, then given the SparkApplication's istio-init) comes from
	// the replicaset controller, which the guard trusts; the same pod from the member is refused.
	webhooked := injectedWith(func(p *corev1.Pod) {
		p.Name, p.Namespace = "spark-server-1", ns
		p.Labels = map[string]string{sparkLaunchedLabel: "true", sparkAppNameLabel: "app", sparkRoleLabel: "driver"}
		p.Spec.Containers[0].Name = "spark-kubernetes-driver"
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "istio-init", Image: "registry.example.com/noop:1"})
	})
	rsController := replicaSetController(t, s, ns)
	refusedWhoeverCreatesIt(t, rsController, member, webhooked)

	const want = "the Spark operator's webhook appends the driver's and executor's initContainers and sidecars"
	for _, role := range []string{"driver", "executor"} {
		for _, field := range []string{"initContainers", "sidecars"} {
			for _, container := range []string{"istio-init", "istio-proxy", "istio-validation"} {
				name := objectName(role + " " + field + " " + container)
				app := sparkApplication(ns, name, role, field,
					map[string]any{"name": "log-shipper", "image": "registry.example.com/shipper:1"},
					map[string]any{"name": container, "image": "registry.example.com/noop:1"})
				guardDenied(t, member.Create(ctx, app.DeepCopy(), client.DryRunAll), guard.KubeflowPolicy, "SparkApplication "+ns+"/"+name+": "+want)
				guardDenied(t, member.Create(ctx, scheduled(app), client.DryRunAll), guard.KubeflowPolicy, "ScheduledSparkApplication "+ns+"/"+name+": "+want)
			}
		}
	}

	// An update that adds the container is refused like a create.
	plainApp := sparkApplication(ns, "plain", "driver", "sidecars", map[string]any{"name": "log-shipper", "image": "registry.example.com/shipper:1"})
	require.NoError(t, member.Create(ctx, plainApp), "a SparkApplication with a sidecar of its own is admitted")
	require.NoError(t, member.Create(ctx, scheduled(plainApp)), "so is a ScheduledSparkApplication of it")
	require.NoError(t, member.Get(ctx, client.ObjectKeyFromObject(plainApp), plainApp))
	require.NoError(t, unstructured.SetNestedSlice(plainApp.Object, []any{map[string]any{"name": "istio-init", "image": "registry.example.com/noop:1"}}, "spec", "executor", "initContainers"))
	guardDenied(t, member.Update(ctx, plainApp, client.DryRunAll), guard.KubeflowPolicy, "SparkApplication "+ns+"/plain: "+want)

	// What the fix keeps: a plain Deployment, also one with the Spark webhook's labels.
	plain := sparkDeployment(ns, "plain", "plain", "driver")
	assert.NoError(t, member.Create(ctx, plain, client.DryRunAll))
}

// scheduled is a ScheduledSparkApplication whose template is app's spec.
func scheduled(app *unstructured.Unstructured) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "ScheduledSparkApplication",
		"metadata": map[string]any{"name": app.GetName(), "namespace": app.GetNamespace()},
		"spec":     map[string]any{"schedule": "@every 1h", "template": runtime.DeepCopyJSONValue(app.Object["spec"])},
	}}
}

// In ambient mode what the Spark operator's pod webhook copies that would take a pod past ztunnel
// is hostNetwork (addHostNetwork: pod.Spec.HostNetwork = true, dnsPolicy ClusterFirstWithHostNet;
// istio/istio cni/pkg/util/enablement_selector.go Matches excludes host-network pods) and an init
// container or sidecar with NET_ADMIN (addInitContainers, addSidecarContainers copy whole
// containers), which could rewrite the pod's own iptables. The twelfth review
// (docs/security/reviews.md) says Pod Security baseline refuses both also for the pods
// kube-controller-manager creates, "not tested": here the webhook's output pod, created as the
// replicaset controller (which the guard trusts), is refused by Pod Security in a managed ambient
// namespace as the runner labels it.
func TestSparkWebhookPodsMeetPodSecurity(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := profileNamespace(t, s, "spark-ambient")
	labelNamespace(t, s, ns, map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "istio.io/dataplane-mode": "ambient"})
	rsController := replicaSetController(t, s, ns)
	webhooked := func(name string, change func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{}
		p.Name, p.Namespace = name, ns
		p.Labels = map[string]string{sparkLaunchedLabel: "true", sparkAppNameLabel: "app", sparkRoleLabel: "driver"}
		p.Spec.Containers = []corev1.Container{{Name: "spark-kubernetes-driver", Image: "registry.example.com/server:1"}}
		change(p)
		return p
	}
	require.NoError(t, rsController.Create(ctx, webhooked("plain", func(*corev1.Pod) {}), client.DryRunAll),
		"the webhook's pod without them is admitted: the guard trusts the replicaset controller")
	for name, change := range map[string]func(p *corev1.Pod){
		"hostNetwork": func(p *corev1.Pod) { p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet },
		"init container with NET_ADMIN": func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "registry.example.com/setup:1",
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}
		},
		"sidecar with NET_RAW and NET_ADMIN": func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "shipper", Image: "registry.example.com/shipper:1",
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_RAW", "NET_ADMIN"}}}})
		},
		"privileged sidecar": func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "shipper", Image: "registry.example.com/shipper:1",
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}})
		},
	} {
		err := rsController.Create(ctx, webhooked(objectName(name), change), client.DryRunAll)
		if assert.Error(t, err, "%s: the webhook's pod from the replicaset controller is admitted", name) {
			assert.Contains(t, err.Error(), "violates PodSecurity", "%s: refused, but not by Pod Security", name)
		}
	}
}
