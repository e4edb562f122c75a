package pss_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
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
// and nothing said why. The configuration refuses mesh.waypoint.seccompPatch: false with an admin
// enforce level of "restricted", because the waypoint pod is then refused and the namespace waits
// for its waypoint forever. A Profile may always tighten, so a data scientist who asked for
// {enforce: restricted} in that configuration got exactly that state. Now the request is refused
// with an error naming spec.plugins[i].spec.enforce and the reason, and enforce stays the admin's.
func TestProfileTighteningToRestrictedWithoutTheWaypointSeccompPatchIsRefused(t *testing.T) {
	cfg := config.Default()
	cfg.Mesh.Waypoint.SeccompPatch = new(bool)
	require.NoError(t, cfg.Validate(), "baseline without the patch is a valid configuration")
	p, err := pss.New(cfg)
	require.NoError(t, err)
	profile := profileAsking(t, "alice", "{enforce: restricted}")
	d, err := p.Generate(plugin.Target{Namespace: profile.Name, Profile: profile})
	require.NoError(t, err)
	assert.Equal(t, "baseline", d.Labels[psaapi.EnforceLevelLabel], "the waypoint pod can never start at restricted without the seccomp patch")
	require.NotEmpty(t, d.Errors, "the refused request is reported")
	assert.Contains(t, d.Errors[0].Error(), "spec.plugins[1].spec.enforce")
	assert.Contains(t, d.Errors[0].Error(), "seccompPatch")

	// With the patch (the default), or outside ambient mode, the Profile may tighten.
	for _, mutate := range []func(*config.Config){
		func(c *config.Config) { c.Mesh.Waypoint.SeccompPatch = nil; c.SetDefaults() },
		func(c *config.Config) { c.Mesh.Mode = config.ModeSidecar },
	} {
		cfg := config.Default()
		cfg.Mesh.Waypoint.SeccompPatch = new(bool)
		mutate(cfg)
		p, err := pss.New(cfg)
		require.NoError(t, err)
		d, err := p.Generate(plugin.Target{Namespace: profile.Name, Profile: profile})
		require.NoError(t, err)
		assert.Equal(t, "restricted", d.Labels[psaapi.EnforceLevelLabel])
		assert.Empty(t, d.Errors)
	}
}
