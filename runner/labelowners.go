package runner

import (
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/labelowners"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// labelOwners says which plugin owns each namespace label the runner owns: the ledger of
// managedFields and annotation (see package labelowners), and what the runner decides for the
// shared keys the annotation names nobody for.
type labelOwners struct {
	labelowners.Ledger
	// byPlugin are, per plugin, the keys LabelFieldManager owns for it: those the annotation names
	// it for, and the data-plane keys it declares that the annotation names nobody for.
	byPlugin labelowners.Owners
	// unattributed are shared keys no plugin is named for: nobody decides for them, so the next
	// write releases them unless a plugin wants them.
	unattributed map[string]bool
	// err: the runner's own managedFields could not be read; no label is written.
	err error
}

// readLabelOwners reads obj's label ledger. A shared key the annotation does not attribute goes to
// the data-plane plugins among plugins that declare it (see DataPlane), so a lost annotation never
// lets a data-plane label go while pods depend on it.
func readLabelOwners(obj client.Object, plugins []plugin.Plugin) labelOwners {
	l, err := labelowners.Read(obj)
	if err != nil {
		return labelOwners{err: err}
	}
	o := labelOwners{Ledger: l, byPlugin: labelowners.Owners{}, unattributed: map[string]bool{}}
	attributed := map[string]bool{}
	for name, keys := range l.Named {
		for k := range keys {
			o.byPlugin.Add(name, k)
			attributed[k] = true
		}
	}
	for k := range l.Shared {
		if attributed[k] {
			continue
		}
		claimed := false
		for _, p := range plugins {
			if isDataPlaneLabel(p, k) {
				o.byPlugin.Add(p.Name(), k)
				claimed = true
			}
		}
		if !claimed {
			o.unattributed[k] = true
		}
	}
	return o
}

// owned is every label key the plugin owns, through either manager.
func (o labelOwners) owned(pluginName string) map[string]bool {
	out := maps.Clone(o.byPlugin[pluginName])
	if out == nil {
		out = map[string]bool{}
	}
	maps.Copy(out, o.Legacy[pluginName])
	return out
}
