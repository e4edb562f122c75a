package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// warnSecondWriters warns about each namespace label a plugin wants that another field manager
// also owns (a platform's own namespace labels or Pod Security overlay, a kubectl label): the
// plugin's value is applied, but the other writer may set it back, and when the plugin lets go of
// the label the other writer's claim keeps it on the namespace. A writer the plugin's own warnings
// already name (pss reports a stricter level it keeps) is not repeated.
func warnSecondWriters(plans []*planned, obs plugin.Observed) {
	// LabelFieldManager is named here only for a label it owns for no plugin, which it releases.
	ours := map[string]bool{plugin.LabelFieldManager: true}
	for _, p := range plans {
		ours[plugin.FieldManager(p.plugin.Name())] = true
	}
	for _, p := range plans {
		if p.failed {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(p.desired.Labels)) {
			var others []string
			for _, m := range obs.LabelManagers[key] {
				if !ours[m] && !named(p.res.Warnings, m) {
					others = append(others, fmt.Sprintf("%q", m))
				}
			}
			if len(others) > 0 {
				p.res.Warnings = append(p.res.Warnings, fmt.Sprintf(
					"plugin %s: namespace label %s is also written by field manager %s; remove it from that writer (see docs/kubeflow.md), or the two may fight and the label outlives the plugin",
					p.plugin.Name(), key, strings.Join(others, ", ")))
			}
		}
	}
}

// named reports whether one of warnings already names the field manager.
func named(warnings []string, manager string) bool {
	for _, w := range warnings {
		if strings.Contains(w, manager) {
			return true
		}
	}
	return false
}
