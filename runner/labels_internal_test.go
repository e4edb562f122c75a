package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

func TestDecideLabels(t *testing.T) {
	t.Parallel()
	owner := plugin.Ref{GroupKind: ztRef.GroupKind, Name: "owner"}
	newPlan := func() *planned {
		return &planned{plugin: dataPlanePlugin{name: "mesh"}, res: &PluginResult{}, desired: plugin.Desired{
			Labels:        map[string]string{"mode": "on", "route": "wp", "free": "x"},
			LabelRequires: map[string][]plugin.Ref{"mode": {ztRef}, "route": {owner, ztRef}, "unwanted": {ztRef}},
		}}
	}
	mine := plugin.FieldManager("mesh")
	intact := protections{why: map[plugin.Ref]string{ztRef: "", owner: ""}}
	broken := protections{why: map[plugin.Ref]string{ztRef: "was changed by another writer (x set spec.action)", owner: ""}}

	p := newPlan()
	got := decideLabels(p, labelled(nil, mine), intact, holds{})
	assert.Equal(t, map[string]string{"mode": "on", "route": "wp", "free": "x"}, got)
	assert.Empty(t, p.res.Waiting)

	// A broken requirement: withheld, and every label that needs it says why.
	p = newPlan()
	got = decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), broken, holds{})
	assert.Equal(t, map[string]string{"free": "x"}, got)
	assert.Equal(t, []string{
		"label mode withheld: AuthorizationPolicy.security.istio.io/zt was changed by another writer (x set spec.action)",
		"label route withheld: AuthorizationPolicy.security.istio.io/zt was changed by another writer (x set spec.action)",
	}, p.res.Waiting)
	assert.Empty(t, p.res.Warnings, "our own label comes off: nothing to warn about")

	// Held for pods: kept, with a warning, only with the value it has.
	held := holdDataPlane([]plugin.Plugin{dataPlanePlugin{name: "mesh"}}, labelled(map[string]string{"mode": "on"}, mine, "mode"), plugin.Observed{Pods: pods("a")})
	p = newPlan()
	got = decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), broken, held)
	assert.Equal(t, "on", got["mode"])
	assert.NotContains(t, got, "route")
	assert.Equal(t, []string{"label mode=on stays although AuthorizationPolicy.security.istio.io/zt was changed by another writer (x set spec.action): 1 running pod(s) would otherwise be outside every data plane: a"}, p.res.Warnings)

	// Held, requirement broken, and the plugin wants another value: no "stays" warning for a value
	// that is not there; the held value stays and the plugin waits.
	p = newPlan()
	p.desired.Labels["mode"] = "other"
	got = decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), broken, held)
	assert.Equal(t, "on", got["mode"])
	assert.Empty(t, p.res.Warnings)
	assert.Contains(t, p.res.Waiting, "label mode withheld: AuthorizationPolicy.security.istio.io/zt was changed by another writer (x set spec.action)")

	// Held, but the plugin wants another value: the held value stays and the plugin waits.
	p = newPlan()
	p.desired.Labels["mode"] = "other"
	got = decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), intact, held)
	assert.Equal(t, "on", got["mode"])
	assert.Len(t, p.res.Waiting, 1)
	assert.Contains(t, p.res.Waiting[0], "keeps mode=on")

	// Held and no longer wanted: the same.
	p = newPlan()
	delete(p.desired.Labels, "mode")
	got = decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), intact, held)
	assert.Equal(t, "on", got["mode"])
	assert.Len(t, p.res.Waiting, 1)

	// Held and wanted as it is: no waiting.
	p = newPlan()
	decideLabels(p, labelled(map[string]string{"mode": "on"}, mine, "mode"), intact, held)
	assert.Empty(t, p.res.Waiting)

	// Another writer's enrolment without the protection is reported.
	p = newPlan()
	ns := labelled(map[string]string{"mode": "on", "route": "elsewhere"}, "kubectl-label", "mode", "route")
	decideLabels(p, ns, broken, holds{})
	assert.Equal(t, []string{"namespace label mode=on was set by kubectl-label although AuthorizationPolicy.security.istio.io/zt was changed by another writer (x set spec.action): the namespace is enrolled without that protection"}, p.res.Warnings)

	// A preview has no namespace.
	p = newPlan()
	p.desired.Labels = nil
	assert.Equal(t, map[string]string{}, decideLabels(p, nil, intact, holds{}))
}
