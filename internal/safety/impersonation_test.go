package safety

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// Impersonation: the API server does not tie a field manager to an identity, so a namespace
// editor can server-side apply a protective object as it stands plus one content field, under the
// runner's own field manager and with --force-conflicts (FINDINGS-2.md, finding 1). No other
// manager then holds the field, and the object is a superset of what the runner applies.

// The state machine draws every impersonation, the waypoint's too: a Gateway that istiod
// programmed with the editor's parametersRef before the runner restores it is not routed to in the
// call that restores it, nor until istiod reports the restored generation Programmed (the status
// the call observed is the editor's version's).
var impersonations = []string{"ztunnel selector", "owner selector", "waypoint parametersRef"}

func (m *machine) ImpersonatedApply(t *rapid.T) {
	skipIf(t, m.w.impersonatedApply(rapid.SampledFrom(impersonations).Draw(t, "field applied under the runner's manager")))
}

// impersonatedApply adds the field to the observed object by a forced apply under the manager of
// the plugin that made it.
func (w *world) impersonatedApply(drift string) error {
	s := w.snap()
	var obj client.Object
	var plugin string
	add := func(spec map[string]any) {
		spec["selector"] = map[string]any{"matchLabels": map[string]any{"app": "nothing"}}
	}
	switch drift {
	case "ztunnel selector", "owner selector":
		name := ztunnelPolicy
		if strings.HasPrefix(drift, "owner") {
			name = ownerPolicy
		}
		p := s.policies[name]
		if p == nil || !managedByPlugin(p, "authz") || len(p.Spec.TargetRefs) > 0 || p.Spec.Selector != nil {
			return errNotApplicable // the CRD refuses selector together with targetRefs
		}
		obj, plugin = p, "authz"
	case "waypoint parametersRef":
		g := s.gateways[waypointName]
		if g == nil || !managedByPlugin(g, "waypoint") {
			return errNotApplicable
		}
		obj, plugin = g, "waypoint"
		add = func(spec map[string]any) {
			spec["infrastructure"] = map[string]any{
				"parametersRef": map[string]any{"group": "", "kind": "ConfigMap", "name": "editor-patch"},
			}
		}
	default:
		panic("unknown impersonation " + drift)
	}
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
	spec, _ := u["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		u["spec"] = spec
	}
	add(spec)
	w.must(w.store.Apply(w.ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}),
		client.FieldOwner(runnerManagers+plugin), client.ForceOwnership))
	w.countGenerations(s) // as the API server counts spec changes
	w.t.Logf("  an editor applied %s under %s%s", drift, runnerManagers, plugin)
	return nil
}

func impersonate(what string) step {
	return step{"an editor applies under the runner's manager: " + what, func(w *world) error { return w.impersonatedApply(what) }}
}

// TestImpersonationSequences replays the impersonations as fixed sequences (FINDINGS-2.md,
// finding 1), checked by the same invariants after every step and every runner write.
func TestImpersonationSequences(t *testing.T) {
	ambient := cfgModel{mode: config.ModeAmbient, enforce: baseline}
	routed := []step{reconcile, istiodSays(true), reconcile}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"a selector on the ztunnel policy", append(routed, impersonate("ztunnel selector"), reconcile, reconcile)},
		{"a selector on the ztunnel policy with a pod running", append(routed, startPod(restricted, false), impersonate("ztunnel selector"), reconcile)},
		{"a parametersRef on the waypoint", append(routed, impersonate("waypoint parametersRef"), reconcile, istiodSays(true), reconcile)},
		{"a parametersRef on the waypoint that istiod programs before the restore", append(routed, impersonate("waypoint parametersRef"), istiodSays(true), reconcile, reconcile, istiodSays(true), reconcile)},
		{"a selector on the owner policy in sidecar mode", append(routed, setMode(config.ModeSidecar), reconcile, impersonate("owner selector"), reconcile)},
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
		})
	}
}
