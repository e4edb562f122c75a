package pss

import "github.com/kubeflow-ambient/profile-plugins/plugin"

var _ plugin.AdmissionGuard = (*Plugin)(nil)

// AdmissionLabels implements plugin.AdmissionGuard: every Pod Security label the plugin sets.
// Without the enforce label the API server admits privileged pods, and without a version label it
// checks at latest, so Revoke takes none of them off.
func (p *Plugin) AdmissionLabels() []string {
	keys := make([]string, 0, 2*len(modes))
	for _, m := range modes {
		keys = append(keys, m.levelLabel, m.versionLabel)
	}
	return keys
}
