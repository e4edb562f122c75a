package pss_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/pss"
)

// What a Profile may ask for, at the boundaries: its admin's own level is no loosening, and the
// mesh limits only the enforce level (audit and warn refuse no pod).
func TestProfileRequestsAtTheBoundaries(t *testing.T) {
	const (
		enforce = "pod-security.kubernetes.io/enforce"
		audit   = "pod-security.kubernetes.io/audit"
		warn    = "pod-security.kubernetes.io/warn"
	)
	sidecarNoCNI := "mesh: {mode: sidecar, istioCNI: false}\npodSecurity: {enforce: {level: privileged}, audit: {level: baseline}, warn: {level: baseline}}\n"
	cases := []struct {
		name, config, spec string
		want               map[string]string
		refused            []string // parts of the one error; nil for none
	}{
		{"the admin's own enforce level", "", "{enforce: baseline}", map[string]string{enforce: "baseline"}, nil},
		{"the admin's own audit level", "", "{audit: restricted}", map[string]string{audit: "restricted"}, nil},
		{"the admin's own warn level", "", "{warn: restricted}", map[string]string{warn: "restricted"}, nil},
		{"a looser warn level", "", "{warn: baseline}", map[string]string{warn: "restricted"}, []string{"spec.plugins[1].spec.warn", "never loosened"}},
		{"sidecar without CNI: privileged stays allowed", sidecarNoCNI, "{enforce: privileged}", map[string]string{enforce: "privileged"}, nil},
		{"sidecar without CNI: baseline is refused", sidecarNoCNI, "{enforce: baseline}", map[string]string{enforce: "privileged"},
			[]string{"spec.plugins[1].spec.enforce", "NET_ADMIN", "enforce stays privileged"}},
		{"sidecar without CNI: a stricter audit is fine", sidecarNoCNI, "{audit: restricted, warn: restricted}",
			map[string]string{enforce: "privileged", audit: "restricted", warn: "restricted"}, nil},
		{"sidecar with CNI: restricted", "mesh: {mode: sidecar}\n", "{enforce: restricted}", map[string]string{enforce: "restricted"}, nil},
		{"no seccomp patch: a restricted audit is fine", "mesh: {waypoint: {seccompPatch: false}}\n", "{audit: restricted, enforce: baseline}",
			map[string]string{enforce: "baseline", audit: "restricted"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pss.New(fixture.Config(t, tc.config))
			require.NoError(t, err)
			d, err := p.Generate(plugin.Target{Namespace: ns, Profile: profileAsking(t, ns, tc.spec)})
			require.NoError(t, err)
			for k, v := range tc.want {
				assert.Equal(t, v, d.Labels[k], k)
			}
			if tc.refused == nil {
				assert.Empty(t, d.Errors)
				return
			}
			require.Len(t, d.Errors, 1)
			for _, part := range tc.refused {
				assert.Contains(t, d.Errors[0].Error(), part)
			}
		})
	}
}
