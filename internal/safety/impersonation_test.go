package safety

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Impersonation: the API server does not tie a field manager to an identity, so a namespace
// editor can server-side apply a protective object as it stands plus one content field, under the
// runner's own field manager and with --force-conflicts (FINDINGS-2.md, finding 1). No other
// manager then holds the field, and the object is a superset of what the runner applies.

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
		if p == nil || !managedByPlugin(p.Labels, "authz") || len(p.Spec.TargetRefs) > 0 || p.Spec.Selector != nil {
			return errNotApplicable // the CRD refuses selector together with targetRefs
		}
		obj, plugin = p, "authz"
	case "waypoint parametersRef":
		g := s.gateways[waypointName]
		if g == nil || !managedByPlugin(g.Labels, "waypoint") {
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
	w.t.Logf("  an editor applied %s under %s%s", drift, runnerManagers, plugin)
	return nil
}
