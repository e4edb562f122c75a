package safety

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
)

var skipInvariants = flag.String("safety.skip", "",
	"comma-separated invariant IDs (W-COVER, R-ENFORCE, ...) not to check; for triage only, to find the next distinct violation")

// defaultChecks is how many sequences `go test` runs; `make fuzz` asks for 10,000.
const defaultChecks = "200"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if _, env := os.LookupEnv("RAPID_CHECKS"); !set && !env {
		if err := flag.Set("rapid.checks", defaultChecks); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// TestRunnerSafety drives the runner with the full plugin set through random sequences of events
// and checks the invariants listed in invariants_test.go after every step and every runner write.
func TestRunnerSafety(t *testing.T) {
	skip := map[string]bool{}
	for _, id := range strings.Split(*skipInvariants, ",") {
		if id = strings.TrimSpace(id); id != "" {
			skip[id] = true
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		cfg := cfgModel{
			mode:    rapid.SampledFrom([]config.MeshMode{config.ModeAmbient, config.ModeSidecar}).Draw(t, "initial mesh mode"),
			enforce: rapid.IntRange(privileged, restricted).Draw(t, "initial admin enforce level (0 privileged, 1 baseline, 2 restricted)"),
			hold:    rapid.Bool().Draw(t, "initial preflight hold"),
		}
		initial := rapid.SampledFrom([]string{"", "baseline"}).Draw(t, "enforce label before the runner first runs")
		w := newWorld(t, cfg, initial, skip)
		t.Logf("start: %s; namespace %s enforce label %q", cfg, userNS, initial)
		t.Repeat(rapid.StateMachineActions(&machine{w}))
	})
}

// machine's exported methods are the actions; rapid names each step after its method.
type machine struct{ w *world }

// Check reports what the step broke; the writes' own checks ran during the step.
func (m *machine) Check(t *rapid.T) {
	if len(m.w.violations) > 0 {
		t.Fatalf("invariant violated:\n  %s", strings.Join(m.w.violations, "\n  "))
	}
}

func (m *machine) skipIfRevoked(t *rapid.T) {
	if m.w.revoked {
		t.Skip("the Profile is being deleted: the controller no longer reconciles or edits it")
	}
}

// --- the controller ---

func (m *machine) Reconcile(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.reconcile()
}

func (m *machine) Revoke(t *rapid.T) {
	m.w.revoked = true
	m.w.revoke()
}

// Settle stops the faults and reconciles (or, once deleted, revokes) four times: the fourth must
// find nothing left to do.
func (m *machine) Settle(t *rapid.T) {
	w := m.w
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

// --- the Profile's author ---

func (m *machine) EditOwner(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.owner = rapid.SampledFrom(append(slices.Clone(validOwners), invalidOwners...)).Draw(t, "owner")
}

func (m *machine) RequestPodSecurity(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.psRequest = rapid.SampledFrom([]string{"", "privileged", "baseline", "restricted", "superuser"}).
		Draw(t, "spec.plugins PodSecurity enforce (\"\" removes the entry)")
}

// --- the admin ---

func (m *machine) SetMeshMode(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.cfg.mode = rapid.SampledFrom([]config.MeshMode{config.ModeAmbient, config.ModeSidecar}).Draw(t, "mesh mode")
}

func (m *machine) SetEnforce(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.cfg.enforce = rapid.IntRange(privileged, restricted).Draw(t, "admin enforce level (0 privileged, 1 baseline, 2 restricted)")
}

func (m *machine) SetPreflight(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.cfg.hold = rapid.Bool().Draw(t, "preflight hold")
}

func (m *machine) SetAdoptOwnerPolicy(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.cfg.adopt = rapid.Bool().Draw(t, "adoptOwnerPolicy")
}

func (m *machine) SetOverride(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.cfg.override = rapid.Bool().Draw(t, "override lets alice choose down to privileged")
}

// --- foreign writers ---

func (m *machine) ForeignCreate(t *rapid.T) {
	w := m.w
	which := rapid.SampledFrom([]string{ztunnelPolicy, ownerPolicy, waypointName}).Draw(t, "object gitops creates first")
	var obj client.Object
	switch which {
	case ztunnelPolicy:
		if w.snap().policies[which] != nil {
			t.Skip("exists")
		}
		obj = foreignPolicy(which, `{"rules":[{"from":[{"source":{"namespaces":["alice","monitoring"]}}]}]}`)
	case ownerPolicy:
		if w.snap().policies[which] != nil {
			t.Skip("exists")
		}
		// The profiles controller's own owner policy from before this library: no targetRefs.
		p := foreignPolicy(which, compact(wantOwner(validOwners[0], false)))
		p.Annotations = map[string]string{"user": validOwners[0], "role": "admin"}
		obj = p
	case waypointName:
		if w.snap().gateways[which] != nil {
			t.Skip("exists")
		}
		obj = &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: which, Namespace: userNS, Generation: 1, Labels: map[string]string{"istio.io/waypoint-for": "service"}},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "istio-waypoint",
				Listeners: []gatewayv1.Listener{{Name: "mesh", Port: 15008, Protocol: "HBONE"}}},
		}
	}
	w.must(w.store.Create(w.ctx, obj, client.FieldOwner(gitops)))
	t.Logf("  gitops created its own %T %s", obj, which)
}

func foreignPolicy(name, spec string) *istiosecurityv1.AuthorizationPolicy {
	p := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: userNS}}
	if err := p.Spec.UnmarshalJSON([]byte(spec)); err != nil {
		panic(err)
	}
	return p
}

func (m *machine) ForeignDelete(t *rapid.T) {
	w := m.w
	which := rapid.SampledFrom([]string{ztunnelPolicy, ownerPolicy, waypointName, seccompCM}).Draw(t, "object someone deletes")
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
		t.Skip("absent")
	}
	w.must(w.store.Delete(w.ctx, obj))
	t.Logf("  %s deleted %s", kubectlEdit, which)
}

var drifts = []string{
	"ztunnel action AUDIT", "ztunnel action CUSTOM with a provider", "ztunnel selector", "ztunnel targetRefs",
	"ztunnel extra rule", "owner action AUDIT", "owner targetRefs removed", "owner extra rule",
	"waypoint class istio", "waypoint listener port 80",
}

// ForeignDrift edits a protective object the way another writer would (kubectl edit: an update
// under its own field manager), within what the CRDs' validation allows.
func (m *machine) ForeignDrift(t *rapid.T) {
	w := m.w
	drift := rapid.SampledFrom(drifts).Draw(t, "drift")
	s := w.snap()
	if strings.HasPrefix(drift, "waypoint") {
		g := s.gateways[waypointName]
		if g == nil {
			t.Skip("no waypoint")
		}
		if drift == "waypoint class istio" {
			g.Spec.GatewayClassName = "istio"
		} else {
			g.Spec.Listeners = []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: "HTTP"}}
		}
		g.Generation++ // as the API server counts spec changes
		w.must(w.store.Update(w.ctx, g, client.FieldOwner(kubectlEdit)))
		t.Logf("  %s: %s", kubectlEdit, drift)
		return
	}
	name := ztunnelPolicy
	if strings.HasPrefix(drift, "owner") {
		name = ownerPolicy
	}
	p := s.policies[name]
	if p == nil {
		t.Skip("no such policy")
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
			t.Skip("the CRD refuses selector together with targetRefs")
		}
		spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "nothing"}}
	case strings.HasSuffix(drift, "targetRefs"):
		if spec.Selector != nil {
			t.Skip("the CRD refuses selector together with targetRefs")
		}
		spec.TargetRefs = []*typev1beta1.PolicyTargetReference{{Group: "gateway.networking.k8s.io", Kind: "Gateway", Name: waypointName}}
	case strings.HasSuffix(drift, "targetRefs removed"):
		if len(spec.TargetRefs) == 0 {
			t.Skip("no targetRefs")
		}
		spec.TargetRefs = nil
	case strings.HasSuffix(drift, "extra rule"):
		spec.Rules = append(spec.Rules, &securityv1beta1.Rule{From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{Namespaces: []string{"intruder"}}}}})
	}
	w.must(w.store.Update(w.ctx, p, client.FieldOwner(kubectlEdit)))
	t.Logf("  %s: %s", kubectlEdit, drift)
}

var gitopsLabelChoices = []string{
	labelDataplane + "=ambient", labelUseWaypoint + "=" + waypointName,
	labelEnforce + "=privileged", labelEnforce + "=baseline", labelEnforce + "=restricted",
}

// GitopsSetLabel: a GitOps tool server-side applies its namespace labels with force.
func (m *machine) GitopsSetLabel(t *rapid.T) {
	kv := rapid.SampledFrom(gitopsLabelChoices).Draw(t, "label gitops sets")
	k, v, _ := strings.Cut(kv, "=")
	m.w.gitopsLabels[k] = v
	m.w.applyGitops()
	t.Logf("  gitops applies namespace labels %s", formatLabels(m.w.gitopsLabels))
}

// GitopsDropLabel: the GitOps tool stops applying a label; it goes away if gitops alone owned it.
func (m *machine) GitopsDropLabel(t *rapid.T) {
	w := m.w
	if len(w.gitopsLabels) == 0 {
		t.Skip("gitops applies no label")
	}
	keys := make([]string, 0, len(w.gitopsLabels))
	for k := range w.gitopsLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	k := rapid.SampledFrom(keys).Draw(t, "label gitops stops applying")
	delete(w.gitopsLabels, k)
	w.applyGitops()
	t.Logf("  gitops applies namespace labels %s", formatLabels(w.gitopsLabels))
}

func (w *world) applyGitops() {
	w.must(w.store.Apply(w.ctx, corev1ac.Namespace(userNS).WithLabels(w.gitopsLabels), client.FieldOwner(gitops), client.ForceOwnership))
}

// KubectlRemoveLabel: `kubectl label ns alice key-` removes a label whoever owns it.
func (m *machine) KubectlRemoveLabel(t *rapid.T) {
	w := m.w
	k := rapid.SampledFrom([]string{labelDataplane, labelUseWaypoint, labelIngress, labelEnforce}).Draw(t, "label kubectl removes")
	if _, ok := w.snap().labels[k]; !ok {
		t.Skip("absent")
	}
	w.must(w.store.Patch(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: userNS}},
		client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, k)),
		client.FieldOwner(kubectlLabel)))
	t.Logf("  kubectl removed label %s", k)
}

// --- the API server ---

func (m *machine) FailWrites(t *rapid.T) {
	k := rapid.IntRange(1, 3).Draw(t, "how many of the runner's next writes fail")
	kind := rapid.SampledFrom([]faultKind{faultServer, faultConflict, faultLostReply}).Draw(t, "fault")
	for range k {
		m.w.faults = append(m.w.faults, kind)
	}
}

func (m *machine) FailRead(t *rapid.T) {
	m.w.readFaults++
}

// --- istiod ---

// Istiod writes the waypoint's status as istiod would: Programmed with an address, or not.
func (m *machine) Istiod(t *rapid.T) {
	w := m.w
	programmed := rapid.Bool().Draw(t, "waypoint Programmed")
	g := w.snap().gateways[waypointName]
	if g == nil {
		t.Skip("no waypoint")
	}
	cond := metav1.Condition{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "AddressNotAssigned",
		Message: "no endpoints", ObservedGeneration: g.Generation, LastTransitionTime: metav1.Now()}
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
	t.Logf("  istiod: waypoint Programmed=%s", cond.Status)
}

// --- pods ---

// PodStart creates a pod as a user would, through Pod Security admission and sidecar injection
// as the namespace's labels decide them now.
func (m *machine) PodStart(t *rapid.T) {
	w := m.w
	shape := rapid.IntRange(privileged, restricted).Draw(t, "strictest level the pod passes (0 privileged, 1 baseline, 2 restricted)")
	s := w.snap()
	var sidecar bool
	switch {
	case s.labels[labelInjection] == "disabled":
	case s.labels[labelInjection] == "enabled" || s.labels[labelRev] != "":
		sidecar = true // the injector adds it
	default:
		sidecar = rapid.Bool().Draw(t, "sidecar (no injection label: a pod that asked for one)")
	}
	if level, _ := s.enforceLevel(); shape < level {
		t.Logf("  a %s-only pod is refused by Pod Security enforce %q", levelNames[shape], s.labels[labelEnforce])
		return
	}
	w.podSeq++
	pod := newPod(fmt.Sprintf("pod-%d", w.podSeq), shape, sidecar)
	w.must(w.store.Create(w.ctx, pod))
	t.Logf("  pod %s started (passes %s, sidecar %t)", pod.Name, levelNames[shape], sidecar)
}

func (m *machine) PodStop(t *rapid.T) {
	w := m.w
	s := w.snap()
	if len(s.pods) == 0 {
		t.Skip("no pods")
	}
	names := make([]string, len(s.pods))
	for i, p := range s.pods {
		names[i] = p.name
	}
	name := rapid.SampledFrom(names).Draw(t, "pod that stops")
	w.must(w.store.Delete(w.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: userNS}}))
	t.Logf("  pod %s stopped", name)
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
