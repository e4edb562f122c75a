package pss

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

var _ plugin.AdmissionGuard = (*Plugin)(nil)

// AdmissionLabels implements plugin.AdmissionGuard: every Pod Security label the plugin sets.
// Without the enforce label the API server admits privileged pods, and without a version label it
// checks at latest, so none of them may go while pods that were admitted under them still run.
func (p *Plugin) AdmissionLabels() []string {
	keys := make([]string, 0, 2*len(modes))
	for _, m := range modes {
		keys = append(keys, m.levelLabel, m.versionLabel)
	}
	return keys
}

// Admitted implements plugin.AdmissionGuard: the pods that neither finished nor are being deleted.
// Pod Security checks only what is created, and the owners of running pods (a ReplicaSet, a
// StatefulSet, a Job) create more as they go. A pod being deleted is not named: if its owner
// replaces it, the replacement is.
func (p *Plugin) Admitted(pods []corev1.Pod) []string {
	var names []string
	for _, pod := range pods {
		switch {
		case pod.DeletionTimestamp != nil, pod.Status.Phase == corev1.PodSucceeded, pod.Status.Phase == corev1.PodFailed:
		default:
			names = append(names, pod.Name)
		}
	}
	sort.Strings(names)
	return names
}
