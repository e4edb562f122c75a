package safety

import (
	"strings"
	"testing"

	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// Istio's own metadata: an actor sets, changes or removes a label or annotation of Istio's domain
// on an object the runner made (istio.io/rev=off switches a policy off for every istiod; see the
// evaluator's istioDomain). The evaluator counts such an object as not protecting, so the
// invariants require the runner to withdraw what routes to it, or restore it first.

// istioMetadataChanges are "labels|annotations key=value"; an empty value removes the key.
var istioMetadataChanges = []string{
	"labels istio.io/rev=off",
	"labels istio.io/rev=default",
	"annotations istio.io/dry-run=true",
	"annotations istio.io/dry-run=",
	"labels istio.io/waypoint-for=none",
	"labels istio.io/waypoint-for=",
	"annotations sidecar.istio.io/proxyImage=evil/proxy:1",
	"annotations networking.istio.io/service-type=LoadBalancer",
}

// The writers: kubectl edit (an Update), a GitOps tool's forced apply of the object with the
// change, and the same apply under the plugin's own field manager name.
var istioMetadataWriters = []string{kubectlEdit, gitops, "the plugin's own manager"}

func (m *machine) ForeignIstioMetadata(t *rapid.T) {
	which := rapid.SampledFrom([]string{ztunnelPolicy, ownerPolicy, waypointName, seccompCM}).Draw(t, "object whose Istio metadata changes")
	change := rapid.SampledFrom(istioMetadataChanges).Draw(t, "Istio metadata change")
	writer := rapid.SampledFrom(istioMetadataWriters).Draw(t, "writer")
	skipIf(t, m.w.foreignIstioMetadata(which, change, writer))
}

// foreignIstioMetadata makes the change on the runner's object, as writer.
func (w *world) foreignIstioMetadata(which, change, writer string) error {
	field, kv, _ := strings.Cut(change, " ")
	key, value, _ := strings.Cut(kv, "=")
	s := w.snap()
	var obj client.Object
	plugin := "authz"
	switch which {
	case ztunnelPolicy, ownerPolicy:
		if p := s.policies[which]; p != nil {
			obj = p
		}
	case waypointName:
		if g := s.gateways[which]; g != nil {
			obj, plugin = g, "waypoint"
		}
	case seccompCM:
		if c := s.configMaps[which]; c != nil {
			obj, plugin = c, "waypoint"
		}
	}
	if obj == nil || !managedByPlugin(obj, plugin) {
		return errNotApplicable
	}
	meta := obj.GetLabels()
	if field == "annotations" {
		meta = obj.GetAnnotations()
	}
	if have, set := meta[key]; (value == "" && !set) || (value != "" && have == value) {
		return errNotApplicable // nothing would change
	}
	if value == "" && writer == gitops {
		return errNotApplicable // an apply removes only what its own manager set
	}
	if p, ok := obj.(*istiosecurityv1.AuthorizationPolicy); ok && writer != gitops && writer != kubectlEdit && p.Spec.Action != securityv1beta1.AuthorizationPolicy_ALLOW {
		// Applied as it stands under the runner's manager, the policy's foreign action would be
		// co-owned by that manager. The runner's apply states action ALLOW and takes it back on a
		// real API server, but this fake client drops the zero value from an apply, so the
		// co-ownership would outlive the apply here only. internal/integration
		// TestAnotherWritersActionCoOwnedUnderThePluginsManagerIsTakenBackOnTheAPIServer covers it.
		return errNotApplicable
	}

	if writer == kubectlEdit {
		if meta == nil {
			meta = map[string]string{}
		}
		if value == "" {
			delete(meta, key)
		} else {
			meta[key] = value
		}
		if field == "annotations" {
			obj.SetAnnotations(meta)
		} else {
			obj.SetLabels(meta)
		}
		w.must(w.store.Update(w.ctx, obj, client.FieldOwner(kubectlEdit)))
		w.t.Logf("  %s: %s %s on %s", kubectlEdit, field, kv, which)
		return nil
	}
	// The object as it stands, with the change, applied with --force-conflicts.
	gvk, err := w.store.GroupVersionKindFor(obj)
	w.must(err)
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	w.must(err)
	u["apiVersion"], u["kind"] = gvk.GroupVersion().String(), gvk.Kind
	md := u["metadata"].(map[string]any)
	for _, k := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"} {
		delete(md, k)
	}
	delete(u, "status")
	m, _ := md[field].(map[string]any)
	if m == nil {
		m = map[string]any{}
		md[field] = m
	}
	if value == "" {
		delete(m, key)
	} else {
		m[key] = value
	}
	manager := gitops
	if writer != gitops {
		manager = runnerManagers + plugin
	}
	w.must(w.store.Apply(w.ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}),
		client.FieldOwner(manager), client.ForceOwnership))
	w.t.Logf("  %s applied %s %s on %s", manager, field, kv, which)
	return nil
}

func istioMetadata(which, change, writer string) step {
	return step{writer + ": " + change + " on " + which, func(w *world) error { return w.foreignIstioMetadata(which, change, writer) }}
}

// TestIstioMetadataSequences replays the finding as fixed sequences (istio.io/rev=off on the
// protective objects), checked by the same invariants after every step and every runner write.
func TestIstioMetadataSequences(t *testing.T) {
	ambient := cfgModel{mode: config.ModeAmbient, enforce: baseline}
	routed := []step{reconcile, istiodSays(true), reconcile}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"istio.io/rev=off on the ztunnel policy with a pod running",
			append(routed, startPod(restricted, false), istioMetadata(ztunnelPolicy, "labels istio.io/rev=off", kubectlEdit), reconcile, reconcile)},
		{"istio.io/rev=off on the owner policy by an apply",
			append(routed, istioMetadata(ownerPolicy, "labels istio.io/rev=off", gitops), reconcile, reconcile)},
		{"istio.io/rev=off on the waypoint under the plugin's own manager",
			append(routed, istioMetadata(waypointName, "labels istio.io/rev=off", "the plugin's own manager"), reconcile, istiodSays(true), reconcile)},
		{"dry-run removed from the ztunnel policy, then set",
			append(routed, istioMetadata(ztunnelPolicy, "annotations istio.io/dry-run=", kubectlEdit), reconcile,
				istioMetadata(ztunnelPolicy, "annotations istio.io/dry-run=true", kubectlEdit), reconcile, reconcile)},
		{"a proxy image on the waypoint while the Profile's owner is invalid",
			append(routed, editOwner("*"), istioMetadata(waypointName, "annotations sidecar.istio.io/proxyImage=evil/proxy:1", kubectlEdit), reconcile)},
		{"istio.io/rev=off on the ztunnel policy while its restore fails",
			append(routed, istioMetadata(ztunnelPolicy, "labels istio.io/rev=off", kubectlEdit), failWrites(3, faultServer), reconcile, reconcile)},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, ambient, "", nil)
			for i, s := range c.steps {
				if err := s.do(w); err != nil {
					t.Fatalf("step %d (%s): %v", i+1, s.name, err)
				}
				if len(w.violations) > 0 {
					t.Fatalf("after step %d (%s):\n  %s", i+1, s.name, strings.Join(w.violations, "\n  "))
				}
			}
			w.settle()
			if len(w.violations) > 0 {
				t.Fatalf("at the fixed point:\n  %s", strings.Join(w.violations, "\n  "))
			}
		})
	}
}
