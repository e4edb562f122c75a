package safety

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// The actors around the runner: the controller's Settle, foreign writers, the API server's faults,
// istiod and pods. Each returns errNotApplicable when the world has nothing for it to act on, so
// the state machine draws another action and a scenario fails loudly.

var errNotApplicable = errors.New("not applicable in this state")

// settle stops the faults and calls the runner four times (reconcile, or revoke once the Profile
// is being deleted): the fourth must find nothing left to do.
func (w *world) settle() {
	w.faults, w.readFaults = nil, 0
	call := w.reconcile
	if w.revoked {
		call = w.revoke
	}
	for range 3 {
		call()
	}
	w.checkFixedPoint(call())
}

// foreignCreate: gitops creates an object under a name the runner manages, before the runner does.
func (w *world) foreignCreate(which string) error {
	s := w.snap()
	var obj client.Object
	switch which {
	case ztunnelPolicy:
		if s.policies[which] != nil {
			return errNotApplicable
		}
		obj = foreignPolicy(which, `{"rules":[{"from":[{"source":{"namespaces":["alice","monitoring"]}}]}]}`)
	case ownerPolicy:
		if s.policies[which] != nil {
			return errNotApplicable
		}
		// The profiles controller's own owner policy from before this library: no targetRefs.
		p := foreignPolicy(which, compact(wantOwner(validOwners[0], false)))
		p.Annotations = map[string]string{"user": validOwners[0], "role": "admin"}
		obj = p
	case waypointName:
		if s.gateways[which] != nil {
			return errNotApplicable
		}
		obj = &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: which, Namespace: userNS, Generation: 1, Labels: map[string]string{"istio.io/waypoint-for": "service"}},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "istio-waypoint",
				Listeners: []gatewayv1.Listener{{Name: "mesh", Port: 15008, Protocol: "HBONE"}}},
		}
	case seccompCM:
		// A patch of the waypoint Deployment that a label-selected cache does not show.
		if s.configMaps[which] != nil {
			return errNotApplicable
		}
		obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: which, Namespace: userNS},
			Data: map[string]string{"deployment": "spec:\n  replicas: 0\n"}}
	default:
		panic("unknown object " + which)
	}
	w.must(w.store.Create(w.ctx, obj, client.FieldOwner(gitops)))
	w.t.Logf("  gitops created its own %s", which)
	return nil
}

func foreignPolicy(name, spec string) *istiosecurityv1.AuthorizationPolicy {
	p := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: userNS}}
	if err := p.Spec.UnmarshalJSON([]byte(spec)); err != nil {
		panic(err)
	}
	return p
}

// foreignDelete: someone deletes an object under a managed name, whoever made it.
func (w *world) foreignDelete(which string) error {
	s := w.snap()
	var obj client.Object
	switch which {
	case ztunnelPolicy, ownerPolicy:
		if p := s.policies[which]; p != nil {
			obj = p
		}
	case waypointName:
		if g := s.gateways[which]; g != nil {
			obj = g
		}
	case seccompCM:
		if c := s.configMaps[which]; c != nil {
			obj = c
		}
	}
	if obj == nil {
		return errNotApplicable
	}
	w.deleteForGood(obj, kubectlEdit)
	w.t.Logf("  %s deleted %s", kubectlEdit, which)
	return nil
}

// deleteForGood deletes obj as writer and, since the runner's finalizer
// (plugin.ProtectionFinalizer) would keep it while pods depend on it, takes the finalizer off as
// well: the writer means it gone.
func (w *world) deleteForGood(obj client.Object, writer string) {
	w.must(w.store.Delete(w.ctx, obj))
	if err := w.store.Get(w.ctx, client.ObjectKeyFromObject(obj), obj); err == nil && len(obj.GetFinalizers()) > 0 {
		obj.SetFinalizers(nil)
		w.must(w.store.Update(w.ctx, obj, client.FieldOwner(writer)))
	}
}

var drifts = []string{
	"ztunnel action AUDIT", "ztunnel action CUSTOM with a provider", "ztunnel selector", "ztunnel targetRefs",
	"ztunnel extra rule", "owner action AUDIT", "owner targetRefs removed", "owner extra rule",
	"waypoint class istio", "waypoint listener port 80",
}

// foreignDrift edits a protective object the way another writer would (kubectl edit: an update
// under its own field manager), within what the CRDs' validation allows.
func (w *world) foreignDrift(drift string) error {
	s := w.snap()
	if strings.HasPrefix(drift, "waypoint") {
		g := s.gateways[waypointName]
		if g == nil {
			return errNotApplicable
		}
		if drift == "waypoint class istio" {
			g.Spec.GatewayClassName = "istio"
		} else {
			g.Spec.Listeners = []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: "HTTP"}}
		}
		g.Generation++ // as the API server counts spec changes
		w.must(w.store.Update(w.ctx, g, client.FieldOwner(kubectlEdit)))
		w.t.Logf("  %s: %s", kubectlEdit, drift)
		return nil
	}
	name := ztunnelPolicy
	if strings.HasPrefix(drift, "owner") {
		name = ownerPolicy
	}
	p := s.policies[name]
	if p == nil {
		return errNotApplicable
	}
	spec := &p.Spec
	switch {
	case strings.HasSuffix(drift, "action AUDIT"):
		spec.Action = securityv1beta1.AuthorizationPolicy_AUDIT
	case strings.HasSuffix(drift, "with a provider"):
		spec.Action = securityv1beta1.AuthorizationPolicy_CUSTOM
		spec.ActionDetail = &securityv1beta1.AuthorizationPolicy_Provider{Provider: &securityv1beta1.AuthorizationPolicy_ExtensionProvider{Name: "ext-authz"}}
	case strings.HasSuffix(drift, "selector"):
		if len(spec.TargetRefs) > 0 {
			return errNotApplicable // the CRD refuses selector together with targetRefs
		}
		spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "nothing"}}
	case strings.HasSuffix(drift, "targetRefs removed"):
		if len(spec.TargetRefs) == 0 {
			return errNotApplicable
		}
		spec.TargetRefs = nil
	case strings.HasSuffix(drift, "targetRefs"):
		if spec.Selector != nil {
			return errNotApplicable
		}
		spec.TargetRefs = []*typev1beta1.PolicyTargetReference{{Group: "gateway.networking.k8s.io", Kind: "Gateway", Name: waypointName}}
	case strings.HasSuffix(drift, "extra rule"):
		spec.Rules = append(spec.Rules, &securityv1beta1.Rule{From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{Namespaces: []string{"intruder"}}}}})
	default:
		panic("unknown drift " + drift)
	}
	w.must(w.store.Update(w.ctx, p, client.FieldOwner(kubectlEdit)))
	w.t.Logf("  %s: %s", kubectlEdit, drift)
	return nil
}

var gitopsLabelChoices = []string{
	labelDataplane + "=ambient", labelUseWaypoint + "=" + waypointName,
	labelEnforce + "=privileged", labelEnforce + "=baseline", labelEnforce + "=restricted",
}

// gitopsSet: a GitOps tool server-side applies its namespace labels with force.
func (w *world) gitopsSet(key, value string) {
	w.gitopsLabels[key] = value
	w.applyGitops()
}

// gitopsDrop: the GitOps tool stops applying a label; it goes away if gitops alone owned it.
func (w *world) gitopsDrop(key string) error {
	if _, ok := w.gitopsLabels[key]; !ok {
		return errNotApplicable
	}
	delete(w.gitopsLabels, key)
	w.applyGitops()
	return nil
}

func (w *world) applyGitops() {
	w.must(w.store.Apply(w.ctx, corev1ac.Namespace(userNS).WithLabels(w.gitopsLabels), client.FieldOwner(gitops), client.ForceOwnership))
	w.t.Logf("  gitops applies namespace labels %s", formatLabels(w.gitopsLabels))
	w.sanctionBeforeFirstRun()
}

// sanctionBeforeFirstRun: until the pss plugin (the runner's only writer of Pod Security labels)
// has written any of them, whatever level the namespace has is the one it had before the runner
// first ran, which preflight hold may keep.
func (w *world) sanctionBeforeFirstRun() {
	s := w.snap()
	for key, owners := range s.labelOwners {
		if strings.HasPrefix(key, "pod-security.kubernetes.io/") && slices.ContainsFunc(owners, isRunnerManager) {
			return
		}
	}
	w.sanctioned = s.labels[labelEnforce]
}

// kubectlRemove: `kubectl label ns alice key-` removes a label whoever owns it.
func (w *world) kubectlRemove(key string) error {
	if _, ok := w.snap().labels[key]; !ok {
		return errNotApplicable
	}
	w.must(w.store.Patch(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: userNS}},
		client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, key)),
		client.FieldOwner(kubectlLabel)))
	w.t.Logf("  kubectl removed label %s", key)
	w.sanctionBeforeFirstRun()
	return nil
}

// failWrites arms faults for the runner's next k writes.
func (w *world) failWrites(k int, kind faultKind) {
	for range k {
		w.faults = append(w.faults, kind)
	}
	w.t.Logf("  the runner's next %d write(s) fail: %s", k, kind)
}

// istiodReports writes the waypoint's status as istiod would: Programmed with an address, or not,
// for the Gateway's current generation.
func (w *world) istiodReports(programmed bool) error {
	g := w.snap().gateways[waypointName]
	if g == nil {
		return errNotApplicable
	}
	cond := metav1.Condition{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "AddressNotAssigned",
		Message: "no endpoints", ObservedGeneration: g.Generation, LastTransitionTime: metav1.Now()}
	// istiod programs a waypoint only with the one listener it accepts (istio-ambient.md); a Gateway
	// of class "istio" is an ingress gateway to it, which it programs whatever its listeners.
	hbone := len(g.Spec.Listeners) == 1 && g.Spec.Listeners[0].Port == 15008 && g.Spec.Listeners[0].Protocol == "HBONE"
	switch {
	case g.Spec.GatewayClassName == "istio-waypoint" && !hbone:
		programmed = false
		cond.Reason, cond.Message = "Invalid", `Expected a single listener on port 15008 with protocol "HBONE"`
	case g.Spec.GatewayClassName != "istio-waypoint" && g.Spec.GatewayClassName != "istio":
		return errNotApplicable // not istiod's class
	}
	g.Status.Addresses = nil
	if programmed {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "Programmed", ""
		g.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: ptr.To(gatewayv1.IPAddressType), Value: "10.96.0.10"}}
	}
	g.Status.Conditions = []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: g.Generation, LastTransitionTime: metav1.Now()},
		cond,
	}
	w.must(w.store.Status().Update(w.ctx, g, client.FieldOwner(istiod)))
	w.t.Logf("  istiod: waypoint generation %d Programmed=%s", g.Generation, cond.Status)
	return nil
}

// injects says whether Istio's injector would add a sidecar to a new pod now, or nil when the
// namespace leaves it to the pod.
func (s snapshot) injects() *bool {
	switch {
	case s.labels[labelInjection] == "disabled":
		return ptr.To(false)
	case s.labels[labelInjection] == "enabled" || s.labels[labelRev] != "":
		return ptr.To(true)
	}
	return nil
}

// podStart creates a pod as a user would, through Pod Security admission and sidecar injection
// as the namespace's labels decide them now; sidecar is used only when the namespace leaves it
// to the pod.
func (w *world) podStart(shape int, sidecar bool) {
	s := w.snap()
	if inj := s.injects(); inj != nil {
		sidecar = *inj
	}
	if level, _ := s.enforceLevel(); shape < level {
		w.t.Logf("  a pod that passes only %s is refused by Pod Security enforce %q", levelNames[shape], s.labels[labelEnforce])
		return
	}
	w.podSeq++
	pod := newPod(fmt.Sprintf("pod-%d", w.podSeq), shape, sidecar)
	w.must(w.store.Create(w.ctx, pod))
	w.t.Logf("  pod %s started (passes %s, sidecar %t)", pod.Name, levelNames[shape], sidecar)
}

func (w *world) podStop(name string) {
	w.must(w.store.Delete(w.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: userNS}}))
	w.t.Logf("  pod %s stopped", name)
}

// newPod makes a pod whose strictest passing Pod Security level is shape.
func newPod(name string, shape int, sidecar bool) *corev1.Pod {
	sc := func() *corev1.SecurityContext {
		switch shape {
		case privileged:
			return &corev1.SecurityContext{Privileged: ptr.To(true)}
		case restricted:
			return &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		}
		return nil
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: userNS},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox", SecurityContext: sc()}}},
	}
	if shape == restricted {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	}
	if sidecar {
		proxy := corev1.Container{Name: sidecarName, Image: "istio/proxyv2", SecurityContext: sc()}
		if shape == privileged {
			proxy.SecurityContext = nil
		}
		pod.Spec.Containers = append(pod.Spec.Containers, proxy)
	}
	return pod
}

// endpoints sets Service svc's EndpointSlice to n endpoints, as the EndpointSlice controller
// would, labelled like the slices of the waypoint's own Service when svc is the waypoint's.
func (w *world) endpoints(svc string, n int, ready bool) error {
	labels := map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: plugin.EndpointSliceController}
	if svc == waypointName {
		labels["gateway.networking.k8s.io/gateway-name"] = waypointName
	}
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svc + "-x1", Namespace: userNS, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4}
	for i := 0; i < n; i++ {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.0.%d", i+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: userNS, Name: fmt.Sprintf("%s-%d", svc, i)}})
	}
	cur := &discoveryv1.EndpointSlice{}
	if err := w.store.Get(w.ctx, client.ObjectKeyFromObject(es), cur); apierrors.IsNotFound(err) {
		return w.store.Create(w.ctx, es)
	} else if err != nil {
		return err
	}
	cur.Endpoints = es.Endpoints
	return w.store.Update(w.ctx, cur)
}

// endpointsGo ends Service svc's endpoints: all terminating, none left, or the slice deleted.
func (w *world) endpointsGo(svc, how string) error {
	cur := &discoveryv1.EndpointSlice{}
	if err := w.store.Get(w.ctx, client.ObjectKey{Namespace: userNS, Name: svc + "-x1"}, cur); err != nil {
		return err
	}
	switch how {
	case "deleted":
		return w.store.Delete(w.ctx, cur)
	case "terminating":
		for i := range cur.Endpoints {
			cur.Endpoints[i].Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Terminating: ptr.To(true)}
		}
	default:
		cur.Endpoints = nil
	}
	return w.store.Update(w.ctx, cur)
}
