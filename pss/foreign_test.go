package pss_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/pss"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

const (
	enforceL  = "pod-security.kubernetes.io/enforce"
	enforceV  = "pod-security.kubernetes.io/enforce-version"
	auditL    = "pod-security.kubernetes.io/audit"
	warnL     = "pod-security.kubernetes.io/warn"
	ours      = "profile-plugins/pss"
	gitops    = "argocd-controller"
	kubectlLb = "kubectl-label"
)

// A level another writer holds is kept when it is stricter than the configured one, and only
// then; the plugin's own earlier level follows the configuration both ways.
func TestStricterLevelOfAnotherWriterIsKept(t *testing.T) {
	cases := []struct {
		name, config string
		profile      *profilev1.Profile
		labels       map[string]string
		managers     map[string][]string
		want         map[string]string // labels the plugin writes (a subset is checked)
		warning      []string          // parts of the one warning; nil means no warning
	}{
		{name: "GitOps enforce restricted over the admin's baseline",
			labels: map[string]string{enforceL: "restricted"}, managers: map[string][]string{enforceL: {gitops}},
			want:    map[string]string{enforceL: "restricted", enforceV: "latest"},
			warning: []string{`enforce level "restricted"`, "field manager " + gitops, `stricter than the configured "baseline"`, "kept, never loosened"}},
		{name: "co-owned stricter level is still another writer's",
			labels: map[string]string{enforceL: "restricted"}, managers: map[string][]string{enforceL: {gitops, ours}},
			want: map[string]string{enforceL: "restricted"}, warning: []string{"field manager " + gitops}},
		{name: "looser level of another writer is tightened",
			labels: map[string]string{enforceL: "privileged"}, managers: map[string][]string{enforceL: {kubectlLb}},
			want: map[string]string{enforceL: "baseline"}},
		{name: "equal level of another writer",
			labels: map[string]string{enforceL: "baseline"}, managers: map[string][]string{enforceL: {kubectlLb}},
			want: map[string]string{enforceL: "baseline"}},
		{name: "the plugin's own earlier stricter level is loosened",
			labels: map[string]string{enforceL: "restricted"}, managers: map[string][]string{enforceL: {ours}},
			want: map[string]string{enforceL: "baseline"}},
		{name: "unknown writer counts as another writer",
			labels: map[string]string{enforceL: "restricted"},
			want:   map[string]string{enforceL: "restricted"}, warning: []string{"an unknown writer"}},
		{name: "the other writer's version goes with its level",
			labels:   map[string]string{enforceL: "restricted", enforceV: "v1.30"},
			managers: map[string][]string{enforceL: {gitops}, enforceV: {gitops}},
			want:     map[string]string{enforceL: "restricted", enforceV: "v1.30"}, warning: []string{"(version v1.30)"}},
		{name: "a version only the plugin set stays the admin's",
			labels:   map[string]string{enforceL: "restricted", enforceV: "latest"},
			managers: map[string][]string{enforceL: {gitops}, enforceV: {ours}},
			want:     map[string]string{enforceL: "restricted", enforceV: "latest"}, warning: []string{gitops}},
		{name: "same level, newer version of another writer is kept",
			config: "podSecurity: {enforce: {level: baseline, version: v1.30}}\n",
			labels: map[string]string{enforceL: "baseline", enforceV: "latest"}, managers: map[string][]string{enforceL: {gitops}, enforceV: {gitops}},
			want: map[string]string{enforceL: "baseline", enforceV: "latest"}, warning: []string{`(version latest)`, `(version v1.30)`}},
		{name: "same level, older version of another writer is replaced",
			labels: map[string]string{enforceL: "baseline", enforceV: "v1.25"}, managers: map[string][]string{enforceL: {gitops}, enforceV: {gitops}},
			want: map[string]string{enforceL: "baseline", enforceV: "latest"}},
		{name: "stricter audit of another writer is kept",
			config: "podSecurity: {audit: {level: baseline}}\n",
			labels: map[string]string{auditL: "restricted"}, managers: map[string][]string{auditL: {gitops}},
			want: map[string]string{auditL: "restricted", enforceL: "baseline"}, warning: []string{`audit level "restricted"`, gitops}},
		{name: "looser warn of another writer is tightened",
			labels: map[string]string{warnL: "baseline"}, managers: map[string][]string{warnL: {gitops}},
			want: map[string]string{warnL: "restricted"}},
		{name: "the Profile's own choice tightens past a looser foreign level",
			profile: profileAsking(t, ns, "{enforce: restricted}"),
			labels:  map[string]string{enforceL: "baseline"}, managers: map[string][]string{enforceL: {gitops}},
			want: map[string]string{enforceL: "restricted"}},
		{name: "a Profile allowed to loosen does not loosen another writer's level",
			config:  "podSecurity: {overrides: [{namespaceSelector: {matchLabels: {example.com/tier: gpu}}, minimumEnforce: privileged}]}\n",
			profile: profileAsking(t, ns, "{enforce: privileged}"),
			labels:  map[string]string{enforceL: "baseline", "example.com/tier": "gpu"}, managers: map[string][]string{enforceL: {"kube-controller-manager"}},
			want: map[string]string{enforceL: "baseline"}, warning: []string{`stricter than the configured "privileged"`}},
		{name: "keeping a stricter level is no tightening: no preflight report",
			labels: map[string]string{enforceL: "restricted"}, managers: map[string][]string{enforceL: {gitops}},
			want: map[string]string{enforceL: "restricted"}, warning: []string{gitops}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pss.New(fixture.Config(t, tc.config))
			require.NoError(t, err)
			d, err := p.Generate(plugin.Target{Namespace: ns, Profile: tc.profile, Observed: plugin.Observed{
				Labels: tc.labels, LabelManagers: tc.managers, Pods: []corev1.Pod{runAsRoot},
			}})
			require.NoError(t, err)
			require.Empty(t, d.Errors)
			for k, v := range tc.want {
				assert.Equal(t, v, d.Labels[k], k)
			}
			assert.Len(t, d.Labels, 6, "every mode is labelled")
			if tc.warning == nil {
				for _, w := range d.Warnings {
					assert.NotContains(t, w, "is kept")
				}
				return
			}
			require.Len(t, d.Warnings, 1, "%v", d.Warnings)
			for _, part := range tc.warning {
				assert.Contains(t, d.Warnings[0], part)
			}
		})
	}
}

// Issue 13: "A stricter level is loosened. A GitOps tool's enforce=restricted is force-applied
// down to the admin's baseline, silently." Through the runner, on a fake API server with
// server-side apply: the level stays, the Result says who set it, and when the GitOps tool
// withdraws its label the level does not vanish (no label would mean privileged).
func TestRunnerKeepsAGitOpsToolsStricterEnforce(t *testing.T) {
	ctx := context.Background()
	profile := &profilev1.Profile{
		ObjectMeta: metav1.ObjectMeta{Name: ns, UID: "u-1"},
		Spec:       profilev1.ProfileSpec{Owner: fixture.User("user@example.com")},
	}
	c := fake.NewClientBuilder().WithScheme(runner.NewScheme()).WithReturnManagedFields().WithObjects(&corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: map[string]string{ownership.OwnerAnnotation: "user@example.com"}},
	}).Build()
	p, err := pss.New(fixture.Config(t, ""))
	require.NoError(t, err)
	r, err := runner.NewRunner(c, p)
	require.NoError(t, err)
	enforce := func() (string, bool) {
		n := &corev1.Namespace{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: ns}, n))
		v, ok := n.Labels[enforceL]
		return v, ok
	}

	require.NoError(t, r.Apply(ctx, profile).Err())
	v, _ := enforce()
	require.Equal(t, "baseline", v)

	// The GitOps tool applies restricted under its own field manager.
	require.NoError(t, c.Apply(ctx, corev1ac.Namespace(ns).WithLabels(map[string]string{enforceL: "restricted"}),
		client.FieldOwner(gitops), client.ForceOwnership))
	res := r.Apply(ctx, profile)
	require.NoError(t, res.Err())
	v, _ = enforce()
	assert.Equal(t, "restricted", v, "never loosened")
	require.Len(t, res.Warnings(), 1)
	assert.Contains(t, res.Warnings()[0], "field manager "+gitops)
	assert.False(t, r.Apply(ctx, profile).Changed(), "steady: no write")

	// The tool withdraws its label: the plugin co-owns the value, so it stays ...
	require.NoError(t, c.Apply(ctx, corev1ac.Namespace(ns).WithLabels(map[string]string{}), client.FieldOwner(gitops), client.ForceOwnership))
	v, ok := enforce()
	assert.True(t, ok, "the enforce label never vanishes")
	assert.Equal(t, "restricted", v)
	// ... and the next call returns it to the admin's level, which is now only the plugin's.
	require.NoError(t, r.Apply(ctx, profile).Err())
	v, _ = enforce()
	assert.Equal(t, "baseline", v)

	// Not even Revoke takes the label away: the namespace outlives its Profile (the owner
	// annotation), and whoever may still create pods there stays held to baseline.
	require.NoError(t, r.Revoke(ctx, profile).Err())
	v, _ = enforce()
	assert.Equal(t, "baseline", v)
}
