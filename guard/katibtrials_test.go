package guard_test

// Katib's Experiments and Trials on the real API server. Katib's pod webhook
// (kubeflow/katib pkg/webhook/v1beta1/pod/inject_webhook.go Mutate, utils.go mutatePodMetadata)
// copies every label of a Trial onto every pod of the trial's job, whoever creates the pod, in each
// namespace labelled katib.kubeflow.org/metrics-collector-injection=enabled, which the profiles
// controller puts on every Profile's namespace (kubeflow/manifests
// applications/profiles/upstream/base/namespace-labels.yaml); the experiment controller gives each
// Trial its Experiment's labels (pkg/controller.v1beta1/util labels.go TrialLabels). The webhook
// also appends a Trial's custom metrics collector, a whole container the tenant writes, to those
// pods. The pods are created by kube-controller-manager's job controller, whose requests the guard
// trusts, so both are judged on the Experiment and the Trial (review R11-1,
// docs/security/reviews.md). kubeflow-edit may write Experiments and Trials (kubeflow-katib-edit).

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

// katibMember installs the Katib CRDs on the guard of mode and returns the server, a namespace of
// the test's own and a kubeflow-edit member there who may write Experiments, Trials and pods.
func katibMember(t *testing.T, mode config.MeshMode, prefix string) (*server, string, client.Client) {
	t.Helper()
	s := guardedIn(t, mode)
	ns := profileNamespace(t, s, prefix)
	installCRD(t, s, ns, katibCRD("Experiment", "experiments"), "kubeflow.org/v1beta1", "ExperimentList")
	installCRD(t, s, ns, katibCRD("Trial", "trials"), "kubeflow.org/v1beta1", "TrialList")
	c := member(t, s, ns, "guard-test-kubeflow-edit-katib", append([]rbacv1.PolicyRule{
		{APIGroups: []string{"kubeflow.org"}, Resources: []string{"experiments", "trials"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
	}, contributorPodRules...))
	require.Eventually(t, func() bool {
		return c.Create(context.Background(), katibObject("Experiment", ns, "probe", nil, nil), client.DryRunAll) == nil
	}, 30*time.Second, 200*time.Millisecond, "a clean Experiment is admitted")
	return s, ns, c
}

// An Experiment (or a Trial) labelled istio.io/dataplane-mode=none puts the label on pods no
// policy judges, and istio-cni leaves them out of the mesh (cni/pkg/util/enablement_selector.go
// Matches).
func TestKatibTrialLabelsRefused(t *testing.T) {
	t.Parallel()
	s, ns, c := katibMember(t, config.ModeAmbient, "katib-labels")
	ctx := context.Background()

	// The pods of a trial's Job are created by kube-controller-manager's job controller, and Katib's
	// webhook has copied the Trial's labels onto them when the guard sees them.
	jobController := bound(t, s, userBinding(ns, "job-controller", "system:serviceaccount:kube-system:job-controller"),
		"guard-test-job-controller-pods", contributorPodRules)
	optedOut := podWith(nil)
	optedOut.Name, optedOut.Namespace = "trial-1-worker", ns
	optedOut.Labels = map[string]string{"katib.kubeflow.org/trial": "trial-1", "istio.io/dataplane-mode": "none"}
	// The guard judges the pod whoever creates it, after Katib's webhook: refused from the job
	// controller as from the member (R11-1 stays refused without the katib check).
	refusedWhoeverCreatesIt(t, jobController, c, optedOut)

	awaitRefusal(t, func() error {
		return c.Create(ctx, katibObject("Experiment", ns, "probe", map[string]string{"istio.io/dataplane-mode": "none"}, nil), client.DryRunAll)
	}, guard.KubeflowPolicy, "an Experiment labelled istio.io/dataplane-mode=none is refused by the guard: the experiment controller copies its labels into its Trials, Katib's webhook onto their pods")

	for name, labels := range map[string]map[string]string{
		"label istio.io/dataplane-mode=none":              {"istio.io/dataplane-mode": "none"},
		"label istio.io/use-waypoint of another waypoint": {"istio.io/use-waypoint": "elsewhere"},
		"label sidecar.istio.io/inject=false":             {"sidecar.istio.io/inject": "false"},
	} {
		for _, kind := range []string{"Experiment", "Trial"} {
			refusedByPolicy(t, c.Create(ctx, katibObject(kind, ns, objectName(kind+" "+name), labels, nil), client.DryRunAll), guard.KubeflowPolicy,
				kind+" with "+name+": Katib copies it onto pods the guard trusts, from a kubeflow-edit member")
		}
	}

	// An update that adds the label is refused too.
	clean := katibObject("Trial", ns, "clean", map[string]string{"team": "ml"}, nil)
	require.NoError(t, c.Create(ctx, clean))
	clean.SetLabels(map[string]string{"team": "ml", "istio.io/dataplane-mode": "none"})
	refusedByPolicy(t, c.Update(ctx, clean, client.DryRunAll), guard.KubeflowPolicy, "an update that labels a Trial istio.io/dataplane-mode=none")

	// What Katib's own controllers and UI set passes.
	assert.NoError(t, c.Create(ctx, katibObject("Experiment", ns, "plain",
		map[string]string{"katib.kubeflow.org/experiment": "plain", "team": "ml"},
		map[string]any{"name": "collector", "image": "registry.example.com/collector:1"}), client.DryRunAll))
}

// In sidecar mode a custom collector named istio-init makes istio-cni skip the pod's redirect
// (cni/pkg/plugin/plugin.go doAddRun); an Experiment's spec.metricsCollectorSpec is copied into
// its Trials.
func TestKatibCollectorNamesRefused(t *testing.T) {
	t.Parallel()
	_, ns, c := katibMember(t, config.ModeSidecar, "katib-collectors")
	ctx := context.Background()
	awaitRefusal(t, func() error {
		return c.Create(ctx, katibObject("Trial", ns, "probe", nil, map[string]any{"name": "istio-init", "image": "registry.example.com/noop:1"}), client.DryRunAll)
	}, guard.KubeflowPolicy, "a Trial whose custom collector is named istio-init is refused by the guard")
	for _, name := range []string{"istio-init", "istio-proxy", "istio-validation"} {
		for _, kind := range []string{"Experiment", "Trial"} {
			refusedByPolicy(t, c.Create(ctx, katibObject(kind, ns, objectName(kind+" "+name), nil,
				map[string]any{"name": name, "image": "registry.example.com/noop:1"}), client.DryRunAll), guard.KubeflowPolicy,
				kind+": a custom collector named "+name+", which Katib appends to pods the guard trusts")
		}
	}
	assert.NoError(t, c.Create(ctx, katibObject("Trial", ns, "plain", nil,
		map[string]any{"name": "collector", "image": "registry.example.com/collector:1"}), client.DryRunAll))
}
