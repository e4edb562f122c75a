package guard_test

// Katib's suggestions in sidecar mode (the webhook review of Dec 5, RW5-3): Katib's controller
// deploys one Deployment per Experiment whose pods opt out of injection. The guard lets exactly
// that through, and nothing a member can make look like it.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
)

// suggestionLabels are the labels Katib gives the pod template of Experiment "tune"'s suggestion
// Deployment for algorithm "random" (kubeflow/katib pkg/controller.v1beta1/util/labels.go
// SuggestionLabels: the Suggestion's labels, Katib's three, and the injection switch).
func suggestionLabels() map[string]string {
	return map[string]string{"katib.kubeflow.org/deployment": "tune-random", "katib.kubeflow.org/experiment": "tune",
		"katib.kubeflow.org/suggestion": "tune", "sidecar.istio.io/inject": "false"}
}

// controlledBy is a controller reference to the named object of kind.
func controlledBy(apiVersion, kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: "5a1b2c3d", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

// suggestionDeployment is the Deployment Katib's composer writes for Suggestion "tune"
// (suggestion/composer/composer.go DesiredDeployment), its template changed by change.
func suggestionDeployment(ns string, change func(*corev1.PodTemplateSpec)) *appsv1.Deployment {
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: suggestionLabels()},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "suggestion", Image: "ghcr.io/kubeflow/katib/suggestion-hyperopt",
			Ports: []corev1.ContainerPort{{Name: "suggestion-api", ContainerPort: 6789}}}}}}
	change(&tpl)
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "tune-random", Namespace: ns, OwnerReferences: controlledBy("kubeflow.org/v1beta1", "Suggestion", "tune")},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl}}
}

// suggestionPod is a pod of the suggestion Deployment's ReplicaSet as kube-controller-manager
// creates it, changed by change.
func suggestionPod(ns, name string, change func(*corev1.Pod)) *corev1.Pod {
	tpl := suggestionDeployment(ns, func(*corev1.PodTemplateSpec) {}).Spec.Template
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: tpl.Labels, Annotations: map[string]string{},
		OwnerReferences: controlledBy("apps/v1", "ReplicaSet", "tune-random-7d4b9c")}, Spec: tpl.Spec}
	p.Labels["pod-template-hash"] = "7d4b9c"
	change(p)
	return p
}

// Katib's suggestions on the sidecar guard.
func TestKatibsSuggestionsInSidecarMode(t *testing.T) {
	t.Parallel()
	s := guardedInSidecarMode(t)
	installKubeflowCRDs(t, s)
	t.Run("Katib's suggestion Deployment and its pods may opt out of the sidecar", func(t *testing.T) { katibsOwnMayOptOut(t, s) })
	t.Run("no member can borrow Katib's opt-out", func(t *testing.T) { noMemberCanBorrowKatibsOptOut(t, s) })
}

func katibsOwnMayOptOut(t *testing.T, s *server) {
	ctx := context.Background()
	ns := s.namespace(t, "katib")
	require.Equal(t, "kubeflow/katib-controller", s.cfg.Guard.KatibController(), "the exemption is on by default")

	d := suggestionDeployment(ns, func(*corev1.PodTemplateSpec) {})
	require.NoError(t, s.as(t, katib).Create(ctx, d), "Katib's controller creates the suggestion Deployment")
	d.Spec.Template.Spec.Containers[0].Image = "ghcr.io/kubeflow/katib/suggestion-hyperopt:v0.18"
	require.NoError(t, s.as(t, katib).Update(ctx, d, client.DryRunAll), "and updates it")
	for _, creator := range []string{kcm, rsCtl} {
		require.NoError(t, s.as(t, creator).Create(ctx, suggestionPod(ns, "tune-random-7d4b9c-x", func(*corev1.Pod) {}), client.DryRunAll),
			"%s creates its pod, not injected", creator)
	}
	// A CNI plugin annotates the pod through its status, as whoever it runs as; a member may
	// change neither its spec nor its labels.
	pod := suggestionPod(ns, "tune-random-7d4b9c-z", func(*corev1.Pod) {})
	require.NoError(t, s.as(t, kcm).Create(ctx, pod))
	pod.Annotations = map[string]string{"cni.projectcalico.org/podIP": "10.0.0.9/32"}
	require.NoError(t, s.as(t, widened).Status().Update(ctx, pod, client.DryRunAll), "an annotation through the status")
	pod.Labels["mine"] = "x"
	refusedBy(t, s.as(t, widened).Status().Update(ctx, pod, client.DryRunAll), "pods/inject-not-true", "a label through the status")
	delete(pod.Labels, "mine")
	pod.Spec.Containers[0].Image = "mine"
	refusedBy(t, s.as(t, editor).Update(ctx, pod, client.DryRunAll), "pods/inject-not-true", "a member's image in Katib's pod")
	// Nor add an ephemeral container of their image to the pod outside the mesh (the tenant
	// re-review of Dec 5; pods/ephemeralcontainers is a right an admin may grant).
	eph := suggestionPod(ns, "tune-random-7d4b9c-z", func(*corev1.Pod) {})
	require.NoError(t, s.env.Client.Get(ctx, client.ObjectKeyFromObject(eph), eph))
	eph.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	refusedBy(t, s.as(t, widened).SubResource("ephemeralcontainers").Update(ctx, eph, client.DryRunAll), "pods/inject-not-true", "an ephemeral container in Katib's pod")

	// Every other check still applies to Katib's own Deployment and pods: only its label opts out.
	for name, change := range map[string]func(*corev1.PodTemplateSpec){
		"workloads/inbound-capture": func(p *corev1.PodTemplateSpec) {
			p.Annotations = map[string]string{"sidecar.istio.io/interceptionMode": "NONE"} // from the Suggestion's annotations
		},
		"workloads/inject-not-true": func(p *corev1.PodTemplateSpec) { p.Annotations = map[string]string{"sidecar.istio.io/inject": "false"} },
		"workloads/use-waypoint":    func(p *corev1.PodTemplateSpec) { p.Labels["istio.io/use-waypoint"] = "elsewhere" }, // from the Suggestion's labels
	} {
		refusedBy(t, s.as(t, katib).Create(ctx, suggestionDeployment(ns, change), client.DryRunAll), name, "Katib's Deployment with another opt-out")
	}
	spark := suggestionDeployment(ns, func(p *corev1.PodTemplateSpec) { p.Labels["sparkoperator.k8s.io/launched-by-spark-operator"] = "true" })
	refusedBy(t, s.as(t, katib).Create(ctx, spark, client.DryRunAll), "workloads/inject-not-true", "Katib's Deployment with a label the Spark operator's webhook selects (the Experiment's)")
}

// noMemberCanBorrowKatibsOptOut: what a member, or a component writing a member's input, can do
// with Katib's labels passes for no suggestion.
func noMemberCanBorrowKatibsOptOut(t *testing.T, s *server) {
	ctx := context.Background()
	ns := s.namespace(t, "katib-borrow")
	withoutSwitch := func(p *corev1.PodTemplateSpec) { delete(p.Labels, "sidecar.istio.io/inject") }
	noChange := func(*corev1.PodTemplateSpec) {}

	// A member's workloads with Katib's labels, whatever their kind and owner.
	for _, user := range members() {
		c := s.as(t, user)
		mine := suggestionDeployment(ns, withoutSwitch)
		mine.OwnerReferences = nil
		refusedBy(t, c.Create(ctx, mine, client.DryRunAll), "workloads/katib-suggestion-labels", user)
		refusedBy(t, c.Create(ctx, suggestionDeployment(ns, withoutSwitch), client.DryRunAll), "workloads/katib-suggestion-labels", user, "naming a Suggestion as its controller")
		refusedByOneOf(t, c.Create(ctx, suggestionDeployment(ns, noChange), client.DryRunAll), []string{"workloads/inject-not-true", "workloads/katib-suggestion-labels"}, user, "with the switch")
		tpl := suggestionDeployment(ns, withoutSwitch).Spec.Template
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "tune-random-7d4b9c", Namespace: ns},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl}}
		refusedBy(t, c.Create(ctx, rs, client.DryRunAll), "workloads/katib-suggestion-labels", user, "a ReplicaSet of its own")
		only := suggestionDeployment(ns, func(p *corev1.PodTemplateSpec) {
			p.Labels = map[string]string{"katib.kubeflow.org/deployment": "tune-random"}
		})
		refusedBy(t, c.Create(ctx, only, client.DryRunAll), "workloads/katib-suggestion-labels", user, "the deployment label alone")
		// A member's pod is never Katib's, whatever it carries.
		refusedByOneOf(t, c.Create(ctx, suggestionPod(ns, "mine", func(*corev1.Pod) {}), client.DryRunAll), []string{"pods/inject-not-true", "pods/injected"}, user)
	}

	// A member's change of Katib's own Deployment.
	d := suggestionDeployment(ns, noChange)
	require.NoError(t, s.as(t, katib).Create(ctx, d))
	d.Spec.Template.Spec.Containers[0].Image = "mine"
	refusedByOneOf(t, s.as(t, editor).Update(ctx, d, client.DryRunAll), []string{"workloads/inject-not-true", "workloads/katib-suggestion-labels"}, "a member's update of Katib's Deployment")

	// Katib's controller writing what is not its suggestion: a trial's run spec (a member's
	// template, controlled by the Trial), or a Deployment whose labels name another Suggestion.
	trials := suggestionDeployment(ns, withoutSwitch)
	trials.OwnerReferences = controlledBy("kubeflow.org/v1beta1", "Trial", "tune-abc123")
	refusedBy(t, s.as(t, katib).Create(ctx, trials, client.DryRunAll), "workloads/katib-suggestion-labels", "a Trial's Deployment")
	trials.Spec.Template.Labels["sidecar.istio.io/inject"] = "false"
	refusedByOneOf(t, s.as(t, katib).Create(ctx, trials, client.DryRunAll), []string{"workloads/inject-not-true", "workloads/katib-suggestion-labels"}, "a Trial's Deployment with the switch")
	other := suggestionDeployment(ns, func(p *corev1.PodTemplateSpec) { p.Labels["katib.kubeflow.org/suggestion"] = "another" })
	refusedByOneOf(t, s.as(t, katib).Create(ctx, other, client.DryRunAll), []string{"workloads/inject-not-true", "workloads/katib-suggestion-labels"}, "labels naming another Suggestion")
	cron := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "CronJob",
		"metadata": map[string]any{"name": "tune", "namespace": ns},
		"spec": map[string]any{"schedule": "@daily", "jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"katib.kubeflow.org/suggestion": "tune"}},
			"spec":     map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{"name": "app", "image": "app"}}}}}}}}}
	refusedBy(t, s.as(t, editor).Create(ctx, cron, client.DryRunAll), "cronjobs/katib-suggestion-labels", "a CronJob")

	// kube-controller-manager's pods that are not a suggestion's as Katib makes them.
	for _, tc := range []struct {
		ids    []string
		why    string
		change func(*corev1.Pod)
	}{
		{[]string{"pods/inbound-capture"}, "another opt-out", func(p *corev1.Pod) { p.Annotations["sidecar.istio.io/interceptionMode"] = "NONE" }},
		{[]string{"pods/inject-not-true"}, "the switch as an annotation", func(p *corev1.Pod) { p.Annotations["sidecar.istio.io/inject"] = "false" }},
		{[]string{"pods/inject-not-true"}, "a Job's pod", func(p *corev1.Pod) { p.OwnerReferences = controlledBy("batch/v1", "Job", "tune-random") }},
		{[]string{"pods/inject-not-true"}, "another Deployment's ReplicaSet", func(p *corev1.Pod) { p.OwnerReferences[0].Name = "elsewhere-7d4b9c" }},
		{[]string{"pods/inject-not-true"}, "without the experiment label", func(p *corev1.Pod) { delete(p.Labels, "katib.kubeflow.org/experiment") }},
		// The pod's labels and annotations are its Experiment's, a member's: a webhook they make
		// select it changes it past Katib's template.
		{[]string{"pods/inject-not-true"}, "a PodDefault applied", func(p *corev1.Pod) { p.Annotations["poddefault.admission.kubeflow.org/poddefault-mine"] = "4711" }},
		{[]string{"pods/inject-not-true"}, "the Spark operator's webhook's label", func(p *corev1.Pod) { p.Labels["sparkoperator.k8s.io/launched-by-spark-operator"] = "true" }},
		{[]string{"pods/inject-not-true"}, "KServe's pod mutator's label", func(p *corev1.Pod) { p.Labels["serving.kserve.io/inferenceservice"] = "mine" }},
		{[]string{"pods/injected"}, "not injected, without the switch", func(p *corev1.Pod) { delete(p.Labels, "sidecar.istio.io/inject") }},
		{[]string{"pods/proxy-runs-sidecar"}, "an istio-proxy of another type", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "proxyv2", Args: []string{"proxy", "router"}})
		}},
		{[]string{"pods/istio-init"}, "an istio-init", func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: "mine"}} }},
	} {
		err := s.as(t, kcm).Create(ctx, suggestionPod(ns, "tune-random-7d4b9c-y", tc.change), client.DryRunAll)
		refusedByOneOf(t, err, tc.ids, tc.why)
		if tc.ids[0] == "pods/inject-not-true" {
			assert.Contains(t, err.Error(), "only Katib's suggestion Deployment", "%s: the message says what may opt out", tc.why)
		}
	}

	// What webhooks copy onto pods kube-controller-manager creates.
	member := s.as(t, widened)
	pd := meshObject("kubeflow.org/v1alpha1", "PodDefault", ns, "katib-labels", map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}, "labels": map[string]any{"katib.kubeflow.org/suggestion": "tune"}})
	refusedBy(t, member.Create(ctx, pd, client.DryRunAll), "kubeflow/poddefault-katib-labels")
	for _, kind := range []string{"Experiment", "Trial"} {
		for _, key := range []string{"katib.kubeflow.org/suggestion", "katib.kubeflow.org/deployment"} {
			o := meshObject("kubeflow.org/v1beta1", kind, ns, "tune", map[string]any{})
			o.SetLabels(map[string]string{key: "tune"})
			refusedBy(t, member.Create(ctx, o, client.DryRunAll), "kubeflow/katib-suggestion-labels", kind, key)
			refusedBy(t, s.as(t, katib).Create(ctx, o, client.DryRunAll), "kubeflow/katib-suggestion-labels", kind, key, "Katib's controller copying an Experiment's labels")
		}
		o := meshObject("kubeflow.org/v1beta1", kind, ns, "tune", map[string]any{})
		o.SetLabels(map[string]string{"katib.kubeflow.org/experiment": "tune"})
		notTheGuards(t, member.Create(ctx, o, client.DryRunAll), kind, "Katib labels every Trial with its Experiment")
	}
}

// In ambient mode Katib's label opts out of nothing the guard judges, and nothing changes: no
// check of Katib's labels, and Katib's Deployment and pods pass as before.
func TestKatibsLabelsChangeNothingInAmbientMode(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	installKubeflowCRDs(t, s)
	ctx := context.Background()
	ns := s.namespace(t, "katib-ambient")
	notTheGuards(t, s.as(t, katib).Create(ctx, suggestionDeployment(ns, func(*corev1.PodTemplateSpec) {}), client.DryRunAll), "Katib's Deployment")
	notTheGuards(t, s.as(t, kcm).Create(ctx, suggestionPod(ns, "tune-random-7d4b9c-x", func(*corev1.Pod) {}), client.DryRunAll), "its pod")
	mine := suggestionDeployment(ns, func(*corev1.PodTemplateSpec) {})
	mine.OwnerReferences = nil
	notTheGuards(t, s.as(t, editor).Create(ctx, mine, client.DryRunAll), "a member's Deployment with Katib's labels")
	pd := meshObject("kubeflow.org/v1alpha1", "PodDefault", ns, "katib-labels", map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}, "labels": map[string]any{"katib.kubeflow.org/suggestion": "tune"}})
	notTheGuards(t, s.as(t, editor).Create(ctx, pd, client.DryRunAll), "a PodDefault with Katib's labels")
}

// The exemption and the checks that keep it Katib's exist together, in sidecar mode only, and an
// admin turns both off with an empty guard.katibControllerServiceAccount.
func TestKatibsExemptionAndItsChecksComeAndGoTogether(t *testing.T) {
	t.Parallel()
	ids := []string{"workloads/katib-suggestion-labels", "cronjobs/katib-suggestion-labels", "kubeflow/poddefault-katib-labels", "kubeflow/katib-suggestion-labels"}
	for _, tc := range []struct {
		name  string
		mode  config.MeshMode
		katib *string
		want  bool
	}{
		{"sidecar", config.ModeSidecar, nil, true},
		{"sidecar, turned off", config.ModeSidecar, ptr.To(""), false},
		{"ambient", config.ModeAmbient, nil, false},
	} {
		cfg := config.Default()
		cfg.Mesh.Mode = tc.mode
		if tc.katib != nil {
			cfg.Guard.KatibControllerServiceAccount = tc.katib
		}
		checks, err := guard.Checks(cfg)
		require.NoError(t, err)
		got := map[string]guard.Check{}
		for _, c := range checks {
			got[c.ID] = c
		}
		for _, id := range ids {
			_, ok := got[id]
			assert.Equal(t, tc.want, ok, "%s: %s", tc.name, id)
		}
		if tc.mode == config.ModeSidecar {
			assert.Equal(t, tc.want, got["pods/inject-not-true"].Passes != "", "%s: the exemption", tc.name)
			assert.Equal(t, tc.want, got["workloads/inject-not-true"].Passes != "", "%s: the exemption", tc.name)
		}
	}
}
