package pss

import (
	"fmt"
	"slices"
	"strings"

	psaapi "k8s.io/pod-security-admission/api"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// mode is one Pod Security mode and its pair of namespace labels.
type mode struct {
	name, levelLabel, versionLabel string
}

var modes = []mode{
	{"enforce", psaapi.EnforceLevelLabel, psaapi.EnforceVersionLabel},
	{"audit", psaapi.AuditLevelLabel, psaapi.AuditVersionLabel},
	{"warn", psaapi.WarnLevelLabel, psaapi.WarnVersionLabel},
}

// keepStricter returns the level the plugin writes for m: want, unless another writer holds a
// stricter one on the namespace, which is kept (and reported) rather than loosened. The plugin
// then writes that same value, so it co-owns the label: if the other writer withdraws its apply,
// the label stays where it was instead of vanishing (no label means privileged), and the plugin
// loosens it to want on a later call, as it may loosen any level that is only its own.
//
// The version label goes with the level when the same writer set it too; a version set by no one
// but this plugin stays the admin's. A label whose writers are unknown (no managedFields) counts
// as another writer's: the plugin never loosens what it cannot prove it wrote.
func keepStricter(obs plugin.Observed, m mode, want config.LevelVersion) (config.LevelVersion, string) {
	value, set := obs.Labels[m.levelLabel]
	if !set {
		return want, ""
	}
	others, foreign := otherWriters(obs, m.levelLabel)
	if !foreign {
		return want, ""
	}
	level, err := psaapi.ParseLevel(value)
	if err != nil {
		return want, "" // the API server refuses invalid values; nothing valid to keep
	}
	kept := config.LevelVersion{Level: level, Version: want.Version}
	if v, ok := obs.Labels[m.versionLabel]; ok {
		if _, theirs := otherWriters(obs, m.versionLabel); theirs {
			kept.Version = v
		}
	}
	if !stricter(kept, want) {
		return want, ""
	}
	return kept, fmt.Sprintf("%s level %q (version %s) set by %s is stricter than the configured %q (version %s) and is kept, never loosened; "+
		"the plugin co-owns it and applies the configured level once no other writer holds the label",
		m.name, kept.Level, kept.Version, others, want.Level, want.Version)
}

// otherWriters names the field managers other than this plugin's that own key, and reports
// whether there is any; writers are unknown, and so foreign, when the namespace had no
// managedFields for key.
func otherWriters(obs plugin.Observed, key string) (string, bool) {
	managers := obs.LabelManagers[key]
	if len(managers) == 0 {
		return "an unknown writer (no managedFields)", true
	}
	others := slices.DeleteFunc(slices.Clone(managers), func(m string) bool { return m == plugin.FieldManager(PluginName) })
	if len(others) == 0 {
		return "", false
	}
	return "field manager " + strings.Join(others, ", "), true
}

// stricter reports whether a is stricter than b: a stricter level, or the same level checked by
// a newer version (latest is the newest), which has more checks.
func stricter(a, b config.LevelVersion) bool {
	c := psaapi.CompareLevels(a.Level, b.Level)
	if c > 0 {
		return true
	}
	if c < 0 {
		return false
	}
	va, errA := psaapi.ParseVersion(a.Version)
	vb, errB := psaapi.ParseVersion(b.Version)
	if errA != nil || errB != nil {
		return false
	}
	return vb.Older(va)
}
