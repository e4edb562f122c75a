package guard

import (
	"strings"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// Katib's suggestion controller deploys, for every Experiment, a Deployment in the Experiment's
// namespace whose pod template opts out of sidecar injection: Katib's labels, the Suggestion's,
// and sidecar.istio.io/inject=false (kubeflow/katib pkg/controller.v1beta1/util/labels.go
// SuggestionLabels; suggestion/composer/composer.go DesiredDeployment, which also makes the
// Suggestion its controller). In sidecar mode the guard lets that one opt-out through, on the
// Deployment as Katib's controller (guard.katibControllerServiceAccount) writes it and on the pods
// kube-controller-manager makes of its ReplicaSets, and refuses Katib's suggestion labels on every
// other template and on what webhooks copy onto pods (PodDefaults, Katib's Experiments and Trials),
// so that no member's pod can pass for a suggestion's.
const (
	katibSuggestionLabel = "katib.kubeflow.org/suggestion"
	katibExperimentLabel = "katib.kubeflow.org/experiment"
	katibDeploymentLabel = "katib.kubeflow.org/deployment"
	// katibSources are the Katib files the exemption rests on.
	katibSources = "kubeflow/katib pkg/controller.v1beta1/util/labels.go SuggestionLabels, suggestion/composer/composer.go DesiredDeployment"
)

// katibExempt is whether Katib's suggestions may opt out of sidecar injection: in sidecar mode,
// with guard.katibControllerServiceAccount set.
func (b builder) katibExempt() bool {
	return b.cfg.Mesh.Mode == config.ModeSidecar && b.cfg.Guard.KatibController() != ""
}

// katibUser is Katib's controller as the API server names it.
func (b builder) katibUser() string {
	ns, name, _ := strings.Cut(b.cfg.Guard.KatibController(), "/")
	return serviceAccountUser(ns, name)
}

// katibsTemplate is whether the request writes Katib's suggestion Deployment: a Deployment
// written by Katib's controller, controlled by a Suggestion of kubeflow.org, whose pod template
// (metadata m) carries the labels SuggestionLabels gives it, naming that Suggestion and this
// Deployment. False unless katibExempt.
func (b builder) katibsTemplate(m string) expr {
	if !b.katibExempt() {
		return "false"
	}
	e := expr(m)
	label := func(k string) expr { return e + ".labels[" + lit(k) + "]" }
	owner := "object.metadata.ownerReferences.exists(r, r.kind == 'Suggestion' && r.apiVersion.startsWith('kubeflow.org/') && has(r.controller) && r.controller && " +
		string(label(katibSuggestionLabel)) + " == r.name)"
	return allOf(eq("request.resource.resource", "deployments"), eq("request.userInfo.username", b.katibUser()),
		expr(hasKey(m, "labels", katibSuggestionLabel, "")), expr(hasKey(m, "labels", katibExperimentLabel, "")), expr(hasKey(m, "labels", katibDeploymentLabel, "")),
		label(katibDeploymentLabel)+" == object.metadata.name", field("object", "metadata", "ownerReferences"), expr(owner), katibUnmutated(m))
}

// katibsPod is whether the request is kube-controller-manager's creation of a pod (metadata m) of
// Katib's suggestion Deployment: controlled by a ReplicaSet of the Deployment Katib's labels name
// (the Deployment controller names its ReplicaSets <deployment>-<pod-template-hash>). No member's
// template may carry those labels (katibLabelsCheck), nor what a webhook copies onto pods
// (kubeflow/poddefault-katib-labels, kubeflow/katib-suggestion-labels). Or it is an update of such
// a pod through its status, which keeps the spec, that keeps its labels: a CNI plugin annotates
// every pod there (Calico's podIP; projectcalico libcalico-go workloadendpoint.go), whoever it runs
// as. False unless katibExempt.
func (b builder) katibsPod(m string) expr {
	if !b.katibExempt() {
		return "false"
	}
	e := expr(m)
	owner := "object.metadata.ownerReferences.exists(r, r.kind == 'ReplicaSet' && r.apiVersion == 'apps/v1' && has(r.controller) && r.controller && " +
		"r.name.startsWith(" + string(e) + ".labels[" + quote(katibDeploymentLabel) + "] + '-'))"
	created := allOf(expr("("+b.kubernetes()+")"), eq("request.operation", "CREATE"))
	status := allOf(eq("request.operation", "UPDATE"), "has(request.subResource)", eq("request.subResource", "status"), "oldObject != null",
		"(has(object.metadata.labels) ? object.metadata.labels : {}) == (has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})")
	return allOf(anyOf(created, status),
		expr(hasKey(m, "labels", katibSuggestionLabel, "")), expr(hasKey(m, "labels", katibExperimentLabel, "")), expr(hasKey(m, "labels", katibDeploymentLabel, "")),
		field("object", "metadata", "ownerReferences"), expr(owner), katibUnmutated(m))
}

// katibUnmutated is whether the pod or template metadata m shows neither the mark nor the trigger
// of a webhook that merges a tenant's input into the pods it selects. A suggestion pod's labels
// and annotations are its Experiment's, a member's (Katib copies them onto the Suggestion:
// kubeflow/katib PR #998, and SuggestionLabels and DesiredDeployment onto the template), so a
// member can make webhooks select it: Kubeflow's PodDefaults (command, args, env, volumes,
// ServiceAccount; the webhook marks every pod it changes with
// poddefault.admission.kubeflow.org/poddefault-<name>: kubeflow/kubeflow
// components/admission-webhook/main.go applyPodDefaultsOnPod), the Spark operator's (containers,
// for pods labelled sparkoperator.k8s.io/: kubeflow/spark-operator internal/webhook
// sparkpod_defaulter.go) and KServe's pod mutator (containers, for pods labelled
// serving.kserve.io/inferenceservice). Such a pod is not Katib's as Katib makes it, and does
// not opt out.
func katibUnmutated(m string) expr {
	return allOf(
		anyOf(expr("!has("+m+".annotations)"), expr("!"+m+".annotations.exists(k, k.startsWith('poddefault.admission.kubeflow.org/'))")),
		anyOf(expr("!has("+m+".labels)"), expr("!"+m+".labels.exists(k, k.startsWith('sparkoperator.k8s.io/') || k.startsWith('serving.kserve.io/'))")))
}

// katibRefusal says, in CEL, why a pod or template (metadata m) with Katib's suggestion label did
// not pass for Katib's: appended to the injection check's message.
func katibRefusal(m string) string {
	return "(" + hasKey(m, "labels", katibSuggestionLabel, "") + " ? '; only Katib\\'s suggestion Deployment, as Katib\\'s controller writes it under a Suggestion, and kube-controller-manager\\'s pods of it " +
		"opt out, by the label alone, with no PodDefault applied and none of the Spark operator\\'s or KServe\\'s labels' : '')"
}

// katibOptOut is whether the pod or template metadata m opts out of injection as Katib's
// suggestions do, sidecar.istio.io/inject=false as a label, and the request is Katib's (exempt:
// katibsTemplate or katibsPod).
func katibOptOut(m string, exempt expr) expr {
	if exempt == "false" {
		return "false"
	}
	return allOf(exempt, expr(hasKey(m, "labels", sidecarInject, "false")))
}

// katibLabelsCheck refuses, on the template (metadata m) of any workload but Katib's suggestion
// Deployment (exempt), the labels that mark a suggestion's pods: with them kube-controller-manager
// would make pods that pass for Katib's and opt out of injection. Nil unless katibExempt.
func (b builder) katibLabelsCheck(m, what string, exempt expr) []Check {
	if !b.katibExempt() {
		return nil
	}
	labels := anyOf(expr(hasKey(m, "labels", katibSuggestionLabel, "")), expr(hasKey(m, "labels", katibDeploymentLabel, "")))
	c := chk("katib-suggestion-labels", AssetPodCapture, katibSources+" (the suggestion Deployment's template); kubernetes pkg/controller/replicaset makes its pods as kube-controller-manager",
		string(anyOf("!variables.managed", not(labels), exempt)),
		"only Katib's controller gives a pod template Katib's suggestion labels ("+katibSuggestionLabel+", "+katibDeploymentLabel+"), on the Deployment its Suggestion controls"+ask,
		what+" + ': the labels "+katibSuggestionLabel+" and "+katibDeploymentLabel+" mark the pods of a Katib suggestion, the only pods of this namespace that may opt out of the sidecar, "+
			"and only Katib\\'s controller ("+b.cfg.Guard.KatibController()+") writes them, on the Deployment a Suggestion controls; remove them (Katib adds them to its own Deployments)"+ask+"'")
	if exempt != "false" {
		c.Passes = "guard.katibControllerServiceAccount, on the Deployment a Suggestion controls"
	}
	return inModes(config.ModeSidecar, c)
}

// katibKubeflowChecks are the kubeflow policy's checks of what a webhook copies onto pods that
// could make a member's pod pass for a Katib suggestion's: Kubeflow's webhook merges a
// PodDefault's spec.labels into the pods it selects (kubeflow/kubeflow
// components/admission-webhook/main.go applyPodDefaultsOnPod), and Katib's pod webhook copies a
// Trial's labels, which include its Experiment's, onto the pods of the trial (kubeflow/katib
// pkg/webhook/v1beta1/pod/inject_webhook.go Mutate; util/labels.go TrialLabels), whose run spec
// may be a Deployment. Nil unless katibExempt.
func (b builder) katibKubeflowChecks() []Check {
	if !b.katibExempt() {
		return nil
	}
	suggestion := "(has(object.metadata.labels) && (" + quote(katibSuggestionLabel) + " in object.metadata.labels || " + quote(katibDeploymentLabel) + " in object.metadata.labels))"
	return inModes(config.ModeSidecar,
		chk("poddefault-katib-labels", AssetPodCapture, "kubeflow components/admission-webhook/main.go applyPodDefaultsOnPod (labels); "+katibSources,
			"request.resource.resource != 'poddefaults' || !variables.managed || !has(object.spec) || !has(object.spec.labels) || !object.spec.labels.exists(k, k.startsWith('katib.kubeflow.org/'))",
			"a PodDefault may not give pods Katib's labels (katib.kubeflow.org/): Katib's suggestion pods alone may opt out of the sidecar"+ask,
			"'PodDefault ' + request.namespace + '/' + object.metadata.name + ': Kubeflow\\'s webhook copies its labels onto the pods it selects, also those kube-controller-manager creates, "+
				"and Katib\\'s labels (katib.kubeflow.org/) would make a pod pass for a Katib suggestion\\'s, which may opt out of the sidecar; remove them (Katib labels its own pods)"+ask+"'"),
		chk("katib-suggestion-labels", AssetPodCapture, "kubeflow/katib pkg/webhook/v1beta1/pod/inject_webhook.go Mutate, pkg/controller.v1beta1/util/labels.go TrialLabels, SuggestionLabels",
			"!(request.resource.resource in ['experiments', 'trials']) || !variables.managed || !"+suggestion,
			"a Katib Experiment or Trial may not carry Katib's suggestion labels ("+katibSuggestionLabel+", "+katibDeploymentLabel+"): Katib copies a Trial's labels onto its pods"+ask,
			"request.kind.kind + ' ' + request.namespace + '/' + object.metadata.name + ': Katib\\'s webhook copies the labels of a Trial (and of its Experiment) onto the pods of the trial, "+
				"and "+katibSuggestionLabel+" or "+katibDeploymentLabel+" would make them pass for a Katib suggestion\\'s, which may opt out of the sidecar; remove them (Katib sets them on its own suggestions)"+ask+"'"))
}

// katibPasses is who passes the injection checks besides the trusted writers where Katib's
// suggestions are exempt: on templates Katib's Deployment, on pods kube-controller-manager's.
func katibPasses(pod bool) string {
	if pod {
		return "kube-controller-manager's pods of a ReplicaSet of Katib's suggestion Deployment (Katib's labels) that no PodDefault, Spark operator or KServe webhook changed, " +
			"and updates of their status that keep their labels, by the label sidecar.istio.io/inject=false alone"
	}
	return "Katib's suggestion Deployment (guard.katibControllerServiceAccount, controlled by a Suggestion), by the label sidecar.istio.io/inject=false alone"
}
