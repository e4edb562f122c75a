package safety

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// Impostors (attack review of Dec 1, finding A): a namespace editor makes objects that carry the
// runner's managed labels, copied from one of its objects, with no controller or with another
// one: under the names the runner manages (replacing the runner's object, as an editor who edits
// the YAML of the patch ConfigMap and applies it again), or under names of their own (a DENY
// policy, a ConfigMap, a second Gateway). The evaluator counts them as the editor's (isManaged
// wants the Profile as controller), so W-FOREIGN says the runner never changes or deletes them,
// W-ROUTE and R-ROUTE that no routing label rests on them, and F-CONVERGE that they never keep the
// runner from reaching a fixed point.

const (
	editor = "namespace-editor"
	// Names of the editor's own objects.
	tenantDeny    = "tenant-deny"
	tenantConfig  = "tenant-config"
	tenantGateway = "tenant-gateway"
	// earlierProfileUID is the UID of a Profile of the same name deleted before this one.
	earlierProfileUID = "6a1c0f6e-0000-4000-8000-0000000000ee"
)

var (
	impostorNames       = []string{ztunnelPolicy, ownerPolicy, waypointName, seccompCM, tenantDeny, tenantConfig, tenantGateway}
	impostorControllers = []string{"none", "a Deployment", "an earlier Profile"}
)

func (m *machine) Impostor(t *rapid.T) {
	rarely(t, 3)
	which := rapid.SampledFrom(impostorNames).Draw(t, "object an editor makes with the runner's labels")
	controller := rapid.SampledFrom(impostorControllers).Draw(t, "its controller")
	skipIf(t, m.w.impostor(which, controller))
}

// impostor: the editor creates the named object with copied labels and the given controller; an
// object the runner manages under that name is replaced (deleted first).
func (w *world) impostor(which, controller string) error {
	s := w.snap()
	meta := metav1.ObjectMeta{Name: which, Namespace: userNS}
	switch controller {
	case "a Deployment":
		meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "editor-app",
			UID: "0d0d0d0d-0000-4000-8000-000000000001", Controller: ptr.To(true)}}
	case "an earlier Profile":
		meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: userNS,
			UID: earlierProfileUID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
	var existing, obj client.Object
	labelled := func(plugin string) map[string]string {
		return map[string]string{labelManagedBy: managedByValue, labelPlugin: plugin}
	}
	switch which {
	case ztunnelPolicy, ownerPolicy, tenantDeny:
		if p := s.policies[which]; p != nil {
			existing = p
		}
		meta.Labels = labelled("authz")
		// Content as the runner's would read, so only ownership tells them apart.
		spec := compact(wantZtunnel())
		switch which {
		case ownerPolicy:
			spec = compact(wantOwner(validOwners[0], true))
		case tenantDeny:
			spec = `{"action":"DENY","rules":[{"from":[{"source":{"namespaces":["intruder"]}}]}]}`
		}
		p := foreignPolicy(which, spec)
		p.ObjectMeta = meta
		obj = p
	case waypointName, tenantGateway:
		if g := s.gateways[which]; g != nil {
			existing = g
		}
		meta.Labels = labelled("waypoint")
		meta.Labels["istio.io/waypoint-for"] = "service"
		meta.Generation = 1
		obj = &gatewayv1.Gateway{ObjectMeta: meta, Spec: gatewayv1.GatewaySpec{GatewayClassName: "istio-waypoint",
			Listeners: []gatewayv1.Listener{{Name: "mesh", Port: 15008, Protocol: "HBONE"}},
			Infrastructure: &gatewayv1.GatewayInfrastructure{ParametersRef: &gatewayv1.LocalParametersReference{
				Group: "", Kind: "ConfigMap", Name: seccompCM}}}}
	case seccompCM, tenantConfig:
		if c := s.configMaps[which]; c != nil {
			existing = c
		}
		meta.Labels = labelled("waypoint")
		obj = &corev1.ConfigMap{ObjectMeta: meta,
			Data: map[string]string{"deployment": "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: editor/proxy\n"}}
	default:
		panic("unknown object " + which)
	}
	if existing != nil {
		if impostor(existing) || !isManaged(existing) {
			return errNotApplicable // already the editor's, or another writer's
		}
		w.deleteForGood(existing, editor)
	}
	w.must(w.store.Create(w.ctx, obj, client.FieldOwner(editor)))
	w.t.Logf("  an editor made %s with the runner's labels, controller: %s (replacing the runner's: %t)", which, controller, existing != nil)
	return nil
}

// impostors counts the objects in the namespace that carry the runner's labels without being its.
func (s snapshot) impostors() int {
	n := 0
	for _, p := range s.policies {
		if impostor(p) {
			n++
		}
	}
	for _, g := range s.gateways {
		if impostor(g) {
			n++
		}
	}
	for _, c := range s.configMaps {
		if impostor(c) {
			n++
		}
	}
	return n
}

func makeImpostor(which, controller string) step {
	return step{"an editor makes " + which + " with the runner's labels (controller: " + controller + ")",
		func(w *world) error { return w.impostor(which, controller) }}
}

// deleteImpostor: the editor (or an admin) deletes the editor's object.
func deleteImpostor(which string) step {
	return step{"the editor's " + which + " is deleted", func(w *world) error {
		s := w.snap()
		var obj client.Object
		if p := s.policies[which]; p != nil {
			obj = p
		} else if g := s.gateways[which]; g != nil {
			obj = g
		} else if c := s.configMaps[which]; c != nil {
			obj = c
		}
		if obj == nil || !impostor(obj) {
			return errNotApplicable
		}
		w.must(w.store.Delete(w.ctx, obj))
		return nil
	}}
}

// TestImpostorSequences replays the attack review's finding A as fixed sequences, checked by the
// same invariants after every step and every runner write, and each ending at a fixed point.
func TestImpostorSequences(t *testing.T) {
	routed := []step{reconcile, istiodSays(true), reconcile, startPod(restricted, false), reconcile}
	settle := step{"settle", func(w *world) error { w.settle(); return nil }}
	for _, c := range []struct {
		name  string
		cfg   cfgModel
		steps []step
	}{
		{"a DENY policy, a ConfigMap and a second Gateway with the runner's labels survive reconciles and revoke",
			cfgModel{mode: config.ModeAmbient, enforce: baseline},
			append(routed, makeImpostor(tenantDeny, "none"), makeImpostor(tenantConfig, "none"), makeImpostor(tenantGateway, "a Deployment"),
				reconcile, settle, revoke, settle)},
		{"the patch ConfigMap replaced with the runner's labels and another controller, which is deleted later",
			cfgModel{mode: config.ModeAmbient, enforce: baseline, wired: true},
			append(routed, makeImpostor(seccompCM, "a Deployment"), reconcile, istiodSays(true), reconcile, settle,
				deleteImpostor(seccompCM), reconcile, istiodSays(true), reconcile, istiodSays(true), settle)},
		{"the ztunnel policy replaced by an intact-looking one with the runner's labels",
			cfgModel{mode: config.ModeAmbient, enforce: baseline},
			append(routed, makeImpostor(ztunnelPolicy, "none"), reconcile, settle)},
		{"an owner policy with the runner's labels is not adopted",
			cfgModel{mode: config.ModeAmbient, enforce: baseline, adopt: true},
			[]step{makeImpostor(ownerPolicy, "none"), reconcile, reconcile, settle}},
		{"a Profile recreated under its name meets the earlier one's objects",
			cfgModel{mode: config.ModeAmbient, enforce: baseline},
			append(routed, makeImpostor(ztunnelPolicy, "an earlier Profile"), makeImpostor(ownerPolicy, "an earlier Profile"),
				makeImpostor(waypointName, "an earlier Profile"), reconcile, settle)},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, c.cfg, "", nil)
			for i, s := range c.steps {
				if err := s.do(w); err != nil {
					t.Fatalf("step %d (%s): %v", i+1, s.name, err)
				}
				if len(w.violations) > 0 {
					t.Fatalf("after step %d (%s):\n  %s", i+1, s.name, strings.Join(w.violations, "\n  "))
				}
			}
			if strings.Contains(c.name, "is deleted") != (w.snap().impostors() == 0) {
				t.Fatalf("%d impostor(s) left at the end", w.snap().impostors())
			}
		})
	}
}
