package integration

// The eleventh review (review11) of the guard at 322010b.
//
// Finding R11-1: Katib's pod webhook (kubeflow/katib pkg/webhook/v1beta1/pod/inject_webhook.go
// Mutate, utils.go mutatePodMetadata) copies every label of a Trial onto every pod of the trial's
// job, whoever creates the pod, in each namespace labelled
// katib.kubeflow.org/metrics-collector-injection=enabled, which the profiles controller puts on
// every Profile's namespace (kubeflow/manifests applications/profiles/upstream/base/namespace-labels.yaml).
// The experiment controller gives each Trial its Experiment's labels (pkg/controller.v1beta1/util
// labels.go TrialLabels). A trial's Job is judged by its template, but its pods are created by
// kube-controller-manager's job controller, whose requests the guard trusts: an Experiment (or a
// Trial) labelled istio.io/dataplane-mode=none puts the label on pods no policy judges, and
// istio-cni leaves them out of the mesh (cni/pkg/util/enablement_selector.go Matches). The
// webhook also appends a Trial's custom metrics collector, a whole container the tenant writes
// (spec.metricsCollector.collector.customCollector; an Experiment's
// spec.metricsCollectorSpec is copied into its Trials), to those pods: in sidecar mode a
// container named istio-init makes istio-cni skip the pod's redirect (cni/pkg/plugin/plugin.go
// doAddRun). kubeflow-edit may write Experiments and Trials (kubeflow-katib-edit).

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

// katibCRD is a Katib CRD (experiments or trials, kubeflow.org/v1beta1) with an open spec.
func katibCRD(kind, plural string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + ".kubeflow.org"},
		"spec": map[string]any{"group": "kubeflow.org", "scope": "Namespaced",
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
			"versions": []any{map[string]any{"name": "v1beta1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}},
	}}
}

// katibObject is an Experiment or a Trial with labels and, if collector is not nil, a custom
// metrics collector container.
func katibObject(kind, ns, name string, labels map[string]string, collector map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"objective": map[string]any{"type": "maximize", "objectiveMetricName": "accuracy"}}
	if collector != nil {
		mc := map[string]any{"collector": map[string]any{"kind": "Custom", "customCollector": collector}}
		if kind == "Experiment" {
			spec["metricsCollectorSpec"] = mc
		} else {
			spec["metricsCollector"] = mc
		}
	}
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1beta1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
	if labels != nil {
		o.SetLabels(labels)
	}
	return o
}

func review11Katib(t *testing.T, mode config.MeshMode, ns string) (*envtest.Env, client.Client) {
	env := envtest.StartFresh(t, 0)
	ctx := context.Background()
	installGuard(t, env.Client, mode)
	profileIn(t, env.Client, ns)
	require.NoError(t, env.Client.Create(ctx, katibCRD("Experiment", "experiments")))
	require.NoError(t, env.Client.Create(ctx, katibCRD("Trial", "trials")))
	require.Eventually(t, func() bool {
		for _, kind := range []string{"ExperimentList", "TrialList"} {
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion("kubeflow.org/v1beta1")
			l.SetKind(kind)
			if env.Client.List(ctx, l, client.InNamespace(ns)) != nil {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "the Katib CRDs are served")
	member := bound(t, env, userBinding(ns, "member-edit", editor, nil), "r11-kubeflow-edit-katib", append([]rbacv1.PolicyRule{
		{APIGroups: []string{"kubeflow.org"}, Resources: []string{"experiments", "trials"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
	}, contributorPodRules...))
	require.Eventually(t, func() bool {
		return member.Create(ctx, katibObject("Experiment", ns, "probe", nil, nil), client.DryRunAll) == nil
	}, 30*time.Second, 200*time.Millisecond, "a clean Experiment is admitted")
	return env, member
}

func TestReview11KatibCopiesTrialLabelsOntoPodsTheGuardTrusts(t *testing.T) {
	ns := "r11-katib"
	env, member := review11Katib(t, config.ModeAmbient, ns)
	ctx := context.Background()

	// The pods of a trial's Job are created by kube-controller-manager's job controller, and Katib's
	// webhook has copied the Trial's labels onto them when the guard sees them.
	jobController := bound(t, env, userBinding(ns, "job-controller", "system:serviceaccount:kube-system:job-controller", nil),
		"r11-job-controller-pods", contributorPodRules)
	optedOut := podWith(nil)
	optedOut.Name, optedOut.Namespace = "trial-1-worker", ns
	optedOut.Labels = map[string]string{"katib.kubeflow.org/trial": "trial-1", "istio.io/dataplane-mode": "none"}
	// The guard judges the pod whoever creates it, after Katib's webhook: refused from the job
	// controller as from the member (R11-1 stays refused without the katib check).
	refusedWhoeverCreatesIt(t, jobController, member, optedOut)

	assert.Eventually(t, func() bool {
		err := member.Create(ctx, katibObject("Experiment", ns, "probe", map[string]string{"istio.io/dataplane-mode": "none"}, nil), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.KubeflowPolicy)
	}, 10*time.Second, 200*time.Millisecond, "an Experiment labelled istio.io/dataplane-mode=none is refused by the guard: the experiment controller copies its labels into its Trials, Katib's webhook onto their pods")

	for name, labels := range map[string]map[string]string{
		"label istio.io/dataplane-mode=none":              {"istio.io/dataplane-mode": "none"},
		"label istio.io/use-waypoint of another waypoint": {"istio.io/use-waypoint": "elsewhere"},
		"label sidecar.istio.io/inject=false":             {"sidecar.istio.io/inject": "false"},
	} {
		for _, kind := range []string{"Experiment", "Trial"} {
			err := member.Create(ctx, katibObject(kind, ns, objectName(kind+" "+name), labels, nil), client.DryRunAll)
			t.Logf("%s %s: %v", kind, name, err)
			if assert.Error(t, err, "%s with %s: Katib copies it onto pods the guard trusts, and it is admitted for a kubeflow-edit member", kind, name) {
				assert.Contains(t, err.Error(), guard.KubeflowPolicy, "%s %s: refused, but not by the guard", kind, name)
			}
		}
	}

	// An update that adds the label is refused too.
	clean := katibObject("Trial", ns, "clean", map[string]string{"team": "ml"}, nil)
	require.NoError(t, member.Create(ctx, clean))
	clean.SetLabels(map[string]string{"team": "ml", "istio.io/dataplane-mode": "none"})
	err := member.Update(ctx, clean, client.DryRunAll)
	if assert.Error(t, err, "an update that labels a Trial istio.io/dataplane-mode=none is admitted") {
		assert.Contains(t, err.Error(), guard.KubeflowPolicy)
	}

	// What Katib's own controllers and UI set passes.
	assert.NoError(t, member.Create(ctx, katibObject("Experiment", ns, "plain",
		map[string]string{"katib.kubeflow.org/experiment": "plain", "team": "ml"},
		map[string]any{"name": "collector", "image": "registry.example.com/collector:1"}), client.DryRunAll))
}

func TestReview11KatibCustomCollectorsMayNotBeNamedAsIstiosContainers(t *testing.T) {
	ns := "r11-katib-sidecar"
	_, member := review11Katib(t, config.ModeSidecar, ns)
	ctx := context.Background()
	assert.Eventually(t, func() bool {
		err := member.Create(ctx, katibObject("Trial", ns, "probe", nil, map[string]any{"name": "istio-init", "image": "registry.example.com/noop:1"}), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.KubeflowPolicy)
	}, 10*time.Second, 200*time.Millisecond, "a Trial whose custom collector is named istio-init is refused by the guard")
	for _, name := range []string{"istio-init", "istio-proxy", "istio-validation"} {
		for _, kind := range []string{"Experiment", "Trial"} {
			err := member.Create(ctx, katibObject(kind, ns, objectName(kind+" "+name), nil,
				map[string]any{"name": name, "image": "registry.example.com/noop:1"}), client.DryRunAll)
			t.Logf("%s with a collector named %s: %v", kind, name, err)
			if assert.Error(t, err, "%s: a custom collector named %s, which Katib appends to pods the guard trusts, is admitted", kind, name) {
				assert.Contains(t, err.Error(), guard.KubeflowPolicy)
			}
		}
	}
	assert.NoError(t, member.Create(ctx, katibObject("Trial", ns, "plain", nil,
		map[string]any{"name": "collector", "image": "registry.example.com/collector:1"}), client.DryRunAll))
}

// Finding R11-2: the R10-1 rule takes a PodDefault's selector to exclude the waypoint's pods when
// it requires a label outside the domains of Istio, the Gateway API and the plugins. But the
// admin's mesh.waypoint.labels go on the Gateway's spec.infrastructure.labels (waypoint Gateway),
// which istiod copies onto the waypoint's pods (istio/istio
// pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go extractInfrastructureLabels,
// translateInfraMeta; manifests/charts/istio-control/istio-discovery/files/waypoint.yaml): a
// PodDefault selecting by such a label (a member reads it on the waypoint's Deployment) passed the
// rule and selected the waypoint's pods.
func TestReview11PodDefaultsMayNotSelectTheWaypointByTheAdminsWaypointLabels(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	ctx := context.Background()
	cfg := config.Default()
	cfg.Mesh.Waypoint.Labels = map[string]string{"team": "platform", "app.kubernetes.io/part-of": "kubeflow"}
	installGuardOf(t, env.Client, cfg)
	ns := "r11-waypoint-labels"
	profileIn(t, env.Client, ns)
	member := crdMember(t, env, ns, podDefaultCRD(), "kubeflow.org/v1alpha1", "PodDefaultList", "r11-kubeflow-edit-poddefaults", []rbacv1.PolicyRule{
		{APIGroups: []string{"kubeflow.org"}, Resources: []string{"poddefaults"}, Verbs: []string{"create", "update", "patch", "delete"}}})
	require.Eventually(t, func() bool {
		err := member.Create(ctx, podDefault(ns, "probe", map[string]any{"labels": map[string]any{"istio.io/dataplane-mode": "none"}}), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.KubeflowPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the Kubeflow policy takes effect")

	for name, selector := range map[string]map[string]any{
		"the admin's waypoint label team":         {"matchLabels": map[string]any{"team": "platform"}},
		"the admin's waypoint label part-of":      {"matchLabels": map[string]any{"app.kubernetes.io/part-of": "kubeflow"}},
		"the admin's waypoint label team, Exists": {"matchExpressions": []any{map[string]any{"key": "team", "operator": "Exists"}}},
		"the admin's waypoint label team, In":     {"matchExpressions": []any{map[string]any{"key": "team", "operator": "In", "values": []any{"platform"}}}},
	} {
		err := member.Create(ctx, podDefaultSelecting(ns, objectName(name), selector, bootstrapOverride()), client.DryRunAll)
		t.Logf("%s: %v", name, err)
		if assert.Error(t, err, "%s: a PodDefault that selects the waypoint's pods by the admin's waypoint label is admitted for a kubeflow-edit member", name) {
			assert.Contains(t, err.Error(), guard.KubeflowPolicy, "%s: refused, but not by the guard", name)
		}
	}
	assert.NoError(t, member.Create(ctx, podDefaultSelecting(ns, "notebooks", map[string]any{"matchLabels": map[string]any{"access-ml-pipeline": "true"}}, bootstrapOverride()), client.DryRunAll),
		"a selector by a label the waypoint lacks is refused")
}
