package safety

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The evaluator is the test's only judge, so it is tested on its own: each case is a state it must
// call intact or broken.

func TestPodShapesAgreeWithPodSecurity(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	for shape := privileged; shape <= restricted; shape++ {
		for _, sidecar := range []bool{false, true} {
			pod := newPod("p", shape, sidecar)
			require.Equal(t, shape, strictestAdmitting(pod), "shape %s sidecar %t", levelNames[shape], sidecar)
			for level := privileged; level <= restricted; level++ {
				lv := psaapi.LevelVersion{Level: psaapi.Level(levelNames[level]), Version: psaapi.LatestVersion()}
				allowed := policy.AggregateCheckResults(eval.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec)).Allowed
				assert.Equal(t, level <= shape, allowed, "a %s-shaped pod (sidecar %t) under enforce %s", levelNames[shape], sidecar, levelNames[level])
			}
		}
	}
}

func policyWith(t *testing.T, name, plugin, spec string) *istiosecurityv1.AuthorizationPolicy {
	t.Helper()
	p := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: userNS}}
	if plugin != "" {
		p.Labels = map[string]string{labelManagedBy: managedByValue, labelPlugin: plugin}
		p.OwnerReferences = controlledByThisProfile()
	}
	require.NoError(t, p.Spec.UnmarshalJSON([]byte(spec)))
	return p
}

func TestEvaluatorJudgesTheZtunnelPolicyByMeaning(t *testing.T) {
	intact := compact(wantZtunnel())
	data, err := json.Marshal(wantZtunnel()["rules"])
	require.NoError(t, err)
	rules := `"rules":` + string(data)
	for _, c := range []struct {
		name, plugin, spec string
		intact             bool
	}{
		{"as generated", "authz", intact, true},
		{"ALLOW written out", "authz", `{"action":"ALLOW",` + rules + `}`, true},
		{"AUDIT: istiod no longer enforces it", "authz", `{"action":"AUDIT",` + rules + `}`, false},
		{"DENY", "authz", `{"action":"DENY",` + rules + `}`, false},
		{"CUSTOM with a provider", "authz", `{"action":"CUSTOM","provider":{"name":"x"},` + rules + `}`, false},
		{"a selector narrows it to some pods", "authz", `{"selector":{"matchLabels":{"app":"x"}},` + rules + `}`, false},
		{"targetRefs move it off ztunnel", "authz", `{"targetRefs":[{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"waypoint"}],` + rules + `}`, false},
		{"an extra rule admits more", "authz", `{"rules":[{"from":[{"source":{"namespaces":["alice"]}}]},{}]}`, false},
		{"made by someone else", "", intact, false},
		{"made by another plugin", "waypoint", intact, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := snapshot{policies: map[string]*istiosecurityv1.AuthorizationPolicy{ztunnelPolicy: policyWith(t, ztunnelPolicy, c.plugin, c.spec)}}
			assert.Equal(t, c.intact, s.ztunnelProblem() == "", s.ztunnelProblem())
		})
	}
	assert.Equal(t, "missing", snapshot{}.ztunnelProblem())
}

func TestEvaluatorJudgesTheOwnerPolicy(t *testing.T) {
	ambient := policyWith(t, ownerPolicy, "authz", compact(wantOwner("alice@example.com", true)))
	sidecar := policyWith(t, ownerPolicy, "authz", compact(wantOwner("alice@example.com", false)))
	s := snapshot{policies: map[string]*istiosecurityv1.AuthorizationPolicy{ownerPolicy: ambient}}
	assert.Empty(t, s.ownerProblem([]string{"alice@example.com"}))
	assert.NotEmpty(t, s.ownerProblem([]string{"carol@example.com"}), "another owner's policy is not this owner's")
	assert.Empty(t, s.ownerProblem(validOwners), "while the Profile's owner is invalid, any earlier valid owner is intact")
	s.policies[ownerPolicy] = sidecar
	assert.NotEmpty(t, s.ownerProblem([]string{"alice@example.com"}), "without targetRefs it is not attached to the waypoint")
}

// controlledByThisProfile is the owner reference the runner sets: this Profile as controller.
func controlledByThisProfile() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: userNS, UID: profileUID, Controller: ptr.To(true)}}
}

// The runner's labels only claim an object: without this Profile as its controller it is an
// editor's, whatever it holds.
func TestEvaluatorWantsTheProfileAsController(t *testing.T) {
	for _, c := range []struct {
		name   string
		owners []metav1.OwnerReference
		ours   bool
	}{
		{"this Profile as controller", controlledByThisProfile(), true},
		{"any version of the Profile's group", []metav1.OwnerReference{{APIVersion: "kubeflow.org/v2", Kind: "Profile", Name: userNS, UID: profileUID, Controller: ptr.To(true)}}, true},
		{"labels copied, no owner", nil, false},
		{"this Profile as an owner, not the controller", []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: userNS, UID: profileUID}}, false},
		{"an earlier Profile of the same name", []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: userNS, UID: earlierProfileUID, Controller: ptr.To(true)}}, false},
		{"another kind with this Profile's UID", []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: userNS, UID: profileUID, Controller: ptr.To(true)}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := policyWith(t, ztunnelPolicy, "authz", compact(wantZtunnel()))
			p.OwnerReferences = c.owners
			assert.Equal(t, c.ours, isManaged(p))
			assert.Equal(t, !c.ours, impostor(p))
			s := snapshot{policies: map[string]*istiosecurityv1.AuthorizationPolicy{ztunnelPolicy: p}}
			assert.Equal(t, c.ours, s.ztunnelProblem() == "", s.ztunnelProblem())
			assert.Equal(t, map[bool]int{true: 0, false: 1}[c.ours], s.impostors())
		})
	}
	unlabelled := policyWith(t, ztunnelPolicy, "", compact(wantZtunnel()))
	assert.False(t, impostor(unlabelled), "an object without the runner's labels claims nothing")
}

func TestEvaluatorJudgesTheWaypoint(t *testing.T) {
	gw := func(mutate func(*gatewayv1.Gateway)) snapshot {
		g := &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: waypointName, Namespace: userNS, Generation: 2,
				Labels: map[string]string{labelManagedBy: managedByValue, labelPlugin: "waypoint"}, OwnerReferences: controlledByThisProfile()},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "istio-waypoint",
				Listeners: []gatewayv1.Listener{{Name: "mesh", Port: 15008, Protocol: "HBONE"}},
				Infrastructure: &gatewayv1.GatewayInfrastructure{ParametersRef: &gatewayv1.LocalParametersReference{
					Group: "", Kind: "ConfigMap", Name: seccompCM}}},
			Status: gatewayv1.GatewayStatus{
				Conditions: []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionTrue, ObservedGeneration: 2}},
				Addresses:  []gatewayv1.GatewayStatusAddress{{Value: "10.0.0.1"}},
			},
		}
		mutate(g)
		patch := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: seccompCM, Namespace: userNS,
			Labels: map[string]string{labelManagedBy: managedByValue, labelPlugin: "waypoint"}, OwnerReferences: controlledByThisProfile()},
			Data: wantPatch()}
		return snapshot{gateways: map[string]*gatewayv1.Gateway{waypointName: g}, configMaps: map[string]*corev1.ConfigMap{seccompCM: patch}}
	}
	assert.Empty(t, gw(func(*gatewayv1.Gateway) {}).waypointProblem(waypointName))
	assert.Empty(t, gw(func(g *gatewayv1.Gateway) { g.Labels["istio.io/waypoint-for"] = "service" }).waypointProblem(waypointName))
	for name, mutate := range map[string]func(*corev1.ConfigMap){
		"its patch ConfigMap has copied labels and another controller": func(c *corev1.ConfigMap) {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "editor", UID: "d", Controller: ptr.To(true)}}
		},
		"its patch ConfigMap holds another key": func(c *corev1.ConfigMap) { c.Data["service"] = "spec: {}" },
		"its patch ConfigMap patches the image": func(c *corev1.ConfigMap) {
			c.Data["deployment"] = "spec: {template: {spec: {containers: [{name: istio-proxy, image: x}]}}}"
		},
	} {
		s := gw(func(*gatewayv1.Gateway) {})
		mutate(s.configMaps[seccompCM])
		assert.NotEmpty(t, s.waypointProblem(waypointName), name)
	}
	missing := gw(func(*gatewayv1.Gateway) {})
	delete(missing.configMaps, seccompCM)
	assert.NotEmpty(t, missing.waypointProblem(waypointName), "its patch ConfigMap is missing")
	// Without a parametersRef istiod builds the waypoint from its defaults, whatever ConfigMap
	// holds the patch's name; only another reference is a problem.
	unpatched := gw(func(g *gatewayv1.Gateway) { g.Spec.Infrastructure = nil })
	unpatched.configMaps[seccompCM].OwnerReferences = nil
	assert.Empty(t, unpatched.waypointProblem(waypointName), "a waypoint that references no ConfigMap")
	assert.NotEmpty(t, unpatched.patchProblem(), "the patch ConfigMap is an impostor")
	other := gw(func(g *gatewayv1.Gateway) { g.Spec.Infrastructure.ParametersRef.Name = "editor-patch" })
	assert.NotEmpty(t, other.waypointProblem(waypointName), "a waypoint patched by another ConfigMap")
	for name, mutate := range map[string]func(*gatewayv1.Gateway){
		"not Programmed":                     func(g *gatewayv1.Gateway) { g.Status.Conditions[0].Status = metav1.ConditionFalse },
		"Programmed for an older generation": func(g *gatewayv1.Gateway) { g.Status.Conditions[0].ObservedGeneration = 1 },
		"no address":                         func(g *gatewayv1.Gateway) { g.Status.Addresses = nil },
		"no condition":                       func(g *gatewayv1.Gateway) { g.Status.Conditions = nil },
		"another class":                      func(g *gatewayv1.Gateway) { g.Spec.GatewayClassName = "istio" },
		"another listener":                   func(g *gatewayv1.Gateway) { g.Spec.Listeners[0].Port = 80 },
		"made by someone else":               func(g *gatewayv1.Gateway) { g.Labels = nil },
		"labelled istio.io/rev=off":          func(g *gatewayv1.Gateway) { g.Labels["istio.io/rev"] = "off" },
		"for no traffic":                     func(g *gatewayv1.Gateway) { g.Labels["istio.io/waypoint-for"] = "none" },
		"another proxy image":                func(g *gatewayv1.Gateway) { g.Annotations = map[string]string{"sidecar.istio.io/proxyImage": "x"} },
		"labels copied, no controller":       func(g *gatewayv1.Gateway) { g.OwnerReferences = nil },
	} {
		assert.NotEmpty(t, gw(mutate).waypointProblem(waypointName), name)
	}
}

func TestEvaluatorFindsWildcardIdentities(t *testing.T) {
	for owner, wildcard := range map[string]bool{"alice@example.com": false, "*": true, "*@example.com": true, "alice*": true} {
		s := snapshot{policies: map[string]*istiosecurityv1.AuthorizationPolicy{ownerPolicy: policyWith(t, ownerPolicy, "authz", compact(wantOwner(owner, true)))}}
		assert.Equal(t, wildcard, len(s.wildcardIdentities()) > 0, owner)
	}
}

func TestEvaluatorCoverage(t *testing.T) {
	s := snapshot{labels: map[string]string{}}
	bare, proxied := podInfo{name: "a"}, podInfo{name: "b", sidecar: true}
	assert.False(t, s.covered(bare))
	assert.True(t, s.covered(proxied))
	s.labels[labelDataplane] = "ambient"
	assert.True(t, s.covered(bare))
	s.labels[labelDataplane] = "none"
	assert.False(t, s.covered(bare))
}

// Istio's own metadata on a protective object is part of what it does: a key of the domain the
// library does not document, or another value, makes the object not protect; other metadata and a
// documented key left out (Istio's default) do not.
func TestEvaluatorJudgesIstioMetadata(t *testing.T) {
	for _, c := range []struct {
		name                string
		labels, annotations map[string]string
		intact              bool
	}{
		{"as documented", nil, map[string]string{"istio.io/dry-run": "false"}, true},
		{"dry-run left to its default", nil, nil, true},
		{"other metadata", map[string]string{"team": "ml", "istio-injection": "enabled"}, map[string]string{"example.com/istio.io": "x"}, true},
		{"istio.io/rev=off: istiod ignores it", map[string]string{"istio.io/rev": "off"}, nil, false},
		{"istio.io/rev=default, which some istiod reads but not every one", map[string]string{"istio.io/rev": "default"}, nil, false},
		{"dry-run", nil, map[string]string{"istio.io/dry-run": "true"}, false},
		{"a key of a sub-domain", nil, map[string]string{"security.istio.io/anything": "x"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := policyWith(t, ztunnelPolicy, "authz", compact(wantZtunnel()))
			for k, v := range c.labels {
				p.Labels[k] = v
			}
			p.Annotations = c.annotations
			s := snapshot{policies: map[string]*istiosecurityv1.AuthorizationPolicy{ztunnelPolicy: p}}
			assert.Equal(t, c.intact, s.ztunnelProblem() == "", s.ztunnelProblem())
		})
	}
	assert.False(t, istioDomain("istio.io.example.com/rev"))
	assert.False(t, istioDomain("istio.io"))
	assert.True(t, istioDomain("sidecar.istio.io/proxyImage"))
}
