package pss_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/pss"
)

// From the security review (branch attack): escalation by a tenant. podSecurity.overrides used to
// match profiles by name pattern, and the README's own example was {profiles: ["gpu-*"],
// minimumEnforce: privileged}. A Profile's name is what the user typed at self-registration in
// the dashboard (exact names are no safer: the user registers "gpu-team" before the admin does).
// So any data scientist registered "gpu-mallory", added {kind: PodSecurity, spec: {enforce:
// privileged}}, and got a privileged namespace: privileged pods, host namespaces and hostPath,
// i.e. the node, and with it every other tenant's traffic and the mesh's certificates.
// Now validation refuses podSecurity.overrides[i].profiles, and the plugin never matches a
// Profile's name even in a configuration that skipped Validate.
func TestAProfileNameNeverGrantsALooserLevel(t *testing.T) {
	cfg := config.Default()
	cfg.PodSecurity.Overrides = []config.PodSecurityOverride{{Profiles: []string{"gpu-*"}, MinimumEnforce: psaapi.LevelPrivileged}}
	err := cfg.Validate()
	require.Error(t, err, "an override on Profile names is user input deciding the level")
	assert.Contains(t, err.Error(), "podSecurity.overrides[0].profiles")
	assert.Contains(t, err.Error(), "namespaceSelector", "the error says what to use instead")

	// Even unvalidated, the name matches nothing.
	p, err := pss.New(cfg)
	require.NoError(t, err)
	// What the dashboard's registration flow lets anyone create: a name and their own owner.
	profile := profileAsking(t, "gpu-mallory", "{enforce: privileged}")
	profile.Spec.Owner.Name = "mallory@example.com"
	d, err := p.Generate(plugin.Target{Namespace: profile.Name, Owner: profile.Spec.Owner.Name, Profile: profile})
	require.NoError(t, err)
	assert.NotEqual(t, "privileged", d.Labels[psaapi.EnforceLevelLabel],
		"a self-registered Profile chose a privileged namespace by picking a name that matches the admin's pattern")
	require.NotEmpty(t, d.Errors)
	assert.Contains(t, d.Errors[0].Error(), "spec.plugins[1].spec.enforce")

	// The admin's namespace label still grants it.
	cfg.PodSecurity.Overrides[0] = config.PodSecurityOverride{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/tier": "gpu"}}, MinimumEnforce: psaapi.LevelPrivileged}
	require.NoError(t, cfg.Validate())
	d, err = p.Generate(plugin.Target{Namespace: profile.Name, Profile: profile, Observed: plugin.Observed{Labels: gpuTier}})
	require.NoError(t, err)
	assert.Equal(t, "privileged", d.Labels[psaapi.EnforceLevelLabel])
}

// From the security review (branch attack): the tenant locks their own namespace (fails closed),
// and nothing said why. Without a seccompProfile the waypoint pod is refused under "restricted",
// and the namespace waits for its waypoint forever. The seccompProfile now comes from the waypoint
// class defaults in istiod's namespace by default, so a Profile may tighten to restricted without
// the per-namespace patch, in every mode; when the class defaults are missing, the waypoint
// plugin's waiting message says so and names the fix (waypoint tests).
func TestProfileMayTightenToRestrictedWithoutThePerNamespacePatch(t *testing.T) {
	profile := profileAsking(t, "alice", "{enforce: restricted}")
	for name, mutate := range map[string]func(*config.Config){
		"ambient, class defaults (default)": func(*config.Config) {},
		"ambient, per-namespace patch":      func(c *config.Config) { c.Mesh.Waypoint.SeccompPatch = ptr(true) },
		"sidecar":                           func(c *config.Config) { c.Mesh.Mode = config.ModeSidecar },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			mutate(cfg)
			require.NoError(t, cfg.Validate())
			p, err := pss.New(cfg)
			require.NoError(t, err)
			d, err := p.Generate(plugin.Target{Namespace: profile.Name, Profile: profile})
			require.NoError(t, err)
			assert.Equal(t, "restricted", d.Labels[psaapi.EnforceLevelLabel])
			assert.Empty(t, d.Errors)
		})
	}
}
