package pss_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/pss"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

const ns = "kubeflow-user-example-com"

func profileAsking(t *testing.T, name, pluginSpec string) *profilev1.Profile {
	t.Helper()
	doc := "apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: " + name + "}\nspec:\n  owner: {kind: User, name: user@example.com}\n"
	if pluginSpec != "" {
		doc += "  plugins:\n  - kind: WorkloadIdentity\n  - kind: PodSecurity\n    spec: " + pluginSpec + "\n"
	}
	p, err := profilev1.ParseYAML([]byte(doc))
	require.NoError(t, err)
	return p
}

// Real pod specs, each violating a different check.
var (
	compliant = corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "compliant"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "app", Image: "app", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}}},
		},
	}
	privileged = podWith("privileged", func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Privileged = ptr(true) })
	hostPath   = podWith("host-path", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/run"}}}}
	})
	runAsRoot = podWith("run-as-root", func(p *corev1.Pod) {
		p.Spec.SecurityContext.RunAsNonRoot = nil
		p.Spec.SecurityContext.RunAsUser = ptr(int64(0))
	})
	finished = podWith("finished-privileged", func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext.Privileged = ptr(true)
		p.Status.Phase = corev1.PodSucceeded
	})
)

func podWith(name string, mutate func(*corev1.Pod)) corev1.Pod {
	p := *compliant.DeepCopy()
	p.Name = name
	mutate(&p)
	return p
}

func ptr[T any](v T) *T { return &v }

func TestViolations(t *testing.T) {
	p, err := pss.New(config.Default())
	require.NoError(t, err)
	pods := []corev1.Pod{compliant, privileged, hostPath, runAsRoot, finished}

	restricted := p.Violations(pods, config.LevelVersion{Level: "restricted", Version: "latest"})
	require.Len(t, restricted, 3, "%v", restricted)
	assert.Contains(t, restricted[0], "host-path (")
	assert.Contains(t, restricted[0], "restricted volume types")
	assert.Contains(t, restricted[1], "privileged (")
	assert.Contains(t, restricted[1], "privileged")
	assert.Contains(t, restricted[2], "run-as-root (")
	assert.Contains(t, restricted[2], "runAsUser=0")

	baseline := p.Violations(pods, config.LevelVersion{Level: "baseline", Version: "v1.30"})
	require.Len(t, baseline, 2, "running as root is allowed at baseline: %v", baseline)
	assert.Contains(t, baseline[0], "host-path")
	assert.Contains(t, baseline[1], "privileged")

	assert.Empty(t, p.Violations(pods, config.LevelVersion{Level: "privileged", Version: "latest"}))
}

type goldenCase struct {
	name, config string
	profile      *profilev1.Profile
	nsLabels     map[string]string
	pods         []corev1.Pod
	// checked here so a blind -update cannot accept a regression
	enforce string
	errs    []string
}

// gpuTier is the namespace label an admin sets to allow a looser enforce level.
var gpuTier = map[string]string{"example.com/tier": "gpu"}

func TestGolden(t *testing.T) {
	cases := []goldenCase{
		{name: "defaults", enforce: "baseline"},
		{name: "pinned-versions", config: "podSecurity: {enforce: {level: baseline, version: v1.35}, audit: {version: v1.36}, warn: {level: restricted, version: v1.36}}\n", enforce: "baseline"},
		{name: "restricted", config: "podSecurity: {enforce: {level: restricted}}\n", enforce: "restricted"},
		{name: "profile-tightens", profile: profileAsking(t, "alice", "{enforce: restricted}"), enforce: "restricted"},
		{name: "override-allowed", config: "podSecurity: {overrides: [{namespaceSelector: {matchLabels: {example.com/tier: gpu}}, minimumEnforce: privileged}]}\n",
			profile: profileAsking(t, "gpu-team", "{enforce: privileged}"), nsLabels: gpuTier, enforce: "privileged"},
		{name: "override-by-namespace-label", config: "podSecurity: {overrides: [{namespaceSelector: {matchLabels: {example.com/tier: system}}, minimumEnforce: privileged}]}\n",
			profile: profileAsking(t, "infra", "{enforce: privileged}"), nsLabels: map[string]string{"example.com/tier": "system"}, enforce: "privileged"},
		{name: "override-refused", config: "podSecurity: {overrides: [{namespaceSelector: {matchLabels: {example.com/tier: gpu}}, minimumEnforce: privileged}]}\n",
			profile: profileAsking(t, "alice", "{enforce: privileged, warn: privileged}"), enforce: "baseline",
			errs: []string{`profile "alice": spec.plugins[1].spec.enforce: level "privileged" refused`, `spec.plugins[1].spec.warn: level "privileged" refused`}},
		{name: "override-below-minimum", config: "podSecurity: {overrides: [{namespaceSelector: {matchLabels: {example.com/tier: gpu}}, minimumEnforce: baseline}], enforce: {level: restricted}}\n",
			profile: profileAsking(t, "gpu-team", "{enforce: privileged}"), nsLabels: gpuTier, enforce: "restricted",
			errs: []string{`down to "baseline" only`}},
		{name: "profile-unknown-field", profile: profileAsking(t, "alice", "{enforce: restricted, enforcee: privileged}"), enforce: "baseline",
			errs: []string{`spec.plugins[1].spec: unknown field "enforcee"`}},
		{name: "sidecar-without-cni-tighten-refused", config: "mesh: {mode: sidecar, istioCNI: false}\npodSecurity: {enforce: {level: privileged}}\n",
			profile: profileAsking(t, "alice", "{enforce: baseline}"), enforce: "privileged", errs: []string{"NET_ADMIN"}},
		{name: "preflight-apply", config: "podSecurity: {enforce: {level: restricted}}\n", nsLabels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"},
			pods: []corev1.Pod{compliant, runAsRoot}, enforce: "restricted"},
		{name: "preflight-hold", config: "podSecurity: {enforce: {level: restricted}, preflight: hold}\n",
			nsLabels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest"},
			pods:     []corev1.Pod{compliant, runAsRoot, privileged}, enforce: "baseline"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fixture.Config(t, tc.config)
			p, err := pss.New(cfg)
			require.NoError(t, err)
			target := plugin.Target{Namespace: ns, Profile: tc.profile, Observed: plugin.Observed{Labels: tc.nsLabels, Pods: tc.pods}}
			if tc.profile != nil {
				target.Namespace = tc.profile.Name
			}
			r, err := runner.Render(runner.NewScheme(), []plugin.Plugin{p}, target)
			require.NoError(t, err)
			assert.Equal(t, tc.enforce, r.Namespace.GetLabels()["pod-security.kubernetes.io/enforce"])
			require.Len(t, r.Errors, len(tc.errs), "%v", r.Errors)
			for i, want := range tc.errs {
				assert.Contains(t, r.Errors[i].Error(), want)
			}
			out, err := r.YAML()
			require.NoError(t, err)
			golden.Assert(t, "pss/"+tc.name+".yaml", append(out, notes(r)...))
		})
	}
}

// notes appends what the Result would say, as YAML comments, so the golden file shows it too.
func notes(r *runner.Rendering) []byte {
	var b strings.Builder
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "# error: %v\n", e)
	}
	for _, w := range r.Waiting {
		fmt.Fprintf(&b, "# waiting: %s\n", w)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "# warning: %s\n", w)
	}
	return []byte(b.String())
}

// Issue 13: "preflight: hold with no level yet (every new namespace, every namespace at
// rollout) leaves the namespace without any enforce label while a violating pod runs." Hold keeps
// an existing level only; without one the admin's level applies and the pods are listed.
func TestPreflightHoldWithoutCurrentLevelAppliesTheAdminsLevel(t *testing.T) {
	p, err := pss.New(fixture.Config(t, "podSecurity: {preflight: hold}\n"))
	require.NoError(t, err)
	d, err := p.Generate(plugin.Target{Namespace: ns, Observed: plugin.Observed{Pods: []corev1.Pod{privileged, compliant}}})
	require.NoError(t, err)
	assert.Equal(t, "baseline", d.Labels["pod-security.kubernetes.io/enforce"], "no label means privileged: never hold that")
	assert.Equal(t, "latest", d.Labels["pod-security.kubernetes.io/enforce-version"])
	assert.Equal(t, "restricted", d.Labels["pod-security.kubernetes.io/warn"], "audit and warn still apply")
	assert.Empty(t, d.Waiting, "nothing is held")
	require.Len(t, d.Warnings, 1)
	assert.Contains(t, d.Warnings[0], "hold keeps an existing enforce level only")
	assert.Contains(t, d.Warnings[0], `tightening enforce from "privileged" to "baseline": 1 running pod(s) violate it`)
	assert.Contains(t, d.Warnings[0], "privileged (", "the violating pod is named")
	assert.NotContains(t, d.Warnings[0], "compliant")
}

// With an enforce label, hold keeps it (and its version) until the pods comply.
func TestPreflightHoldKeepsAnExistingLevel(t *testing.T) {
	p, err := pss.New(fixture.Config(t, "podSecurity: {enforce: {level: restricted}, preflight: hold}\n"))
	require.NoError(t, err)
	obs := plugin.Observed{
		Labels:        map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "v1.30"},
		LabelManagers: map[string][]string{"pod-security.kubernetes.io/enforce": {"profile-plugins/pss"}, "pod-security.kubernetes.io/enforce-version": {"profile-plugins/pss"}},
		Pods:          []corev1.Pod{runAsRoot},
	}
	d, err := p.Generate(plugin.Target{Namespace: ns, Observed: obs})
	require.NoError(t, err)
	assert.Equal(t, "baseline", d.Labels["pod-security.kubernetes.io/enforce"])
	assert.Equal(t, "v1.30", d.Labels["pod-security.kubernetes.io/enforce-version"])
	require.Len(t, d.Waiting, 1)
	assert.Contains(t, d.Waiting[0], `holding enforce at "baseline"`)
	assert.Contains(t, d.Waiting[0], "run-as-root (")

	obs.Pods = []corev1.Pod{compliant}
	d, err = p.Generate(plugin.Target{Namespace: ns, Observed: obs})
	require.NoError(t, err)
	assert.Equal(t, "restricted", d.Labels["pod-security.kubernetes.io/enforce"], "once the pods comply, the level tightens")
	assert.Empty(t, d.Waiting)
}

func TestNoPreflightReportWhenNotTightening(t *testing.T) {
	p, err := pss.New(config.Default())
	require.NoError(t, err)
	d, err := p.Generate(plugin.Target{Namespace: ns, Observed: plugin.Observed{
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}, Pods: []corev1.Pod{privileged},
	}})
	require.NoError(t, err)
	assert.Empty(t, d.Warnings, "enforce stays baseline, so the existing violation was reported when it was tightened")
}

func TestSidecarWithoutCNIConfigError(t *testing.T) {
	_, err := config.Parse([]byte("apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\nmesh: {mode: sidecar, istioCNI: false}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "podSecurity.enforce.level")
	golden.Assert(t, "pss/sidecar-without-cni-config-error.txt", []byte(err.Error()+"\n"))
}

// Every refusal of a Profile's request names the profile and the field path.
func TestProfileRequestErrors(t *testing.T) {
	cases := []struct {
		name, spec string
		want       []string
	}{
		{"unknown level", "{enforce: strict}", []string{`profile "alice"`, "spec.plugins[1].spec.enforce", `"strict"`, "privileged, baseline or restricted"}},
		{"unknown audit level", "{audit: none}", []string{"spec.plugins[1].spec.audit", `"none"`}},
		{"loosen audit", "{audit: baseline}", []string{"spec.plugins[1].spec.audit", `"baseline"`, "never loosened"}},
		{"loosen enforce", "{enforce: privileged}", []string{"spec.plugins[1].spec.enforce", `"privileged"`, "no podSecurity.overrides entry"}},
		{"wrong type", "{enforce: [restricted]}", []string{"spec.plugins[1].spec"}},
		{"unknown field", "{level: restricted}", []string{`spec.plugins[1].spec: unknown field "level"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pss.New(config.Default())
			require.NoError(t, err)
			d, err := p.Generate(plugin.Target{Namespace: "alice", Profile: profileAsking(t, "alice", tc.spec)})
			require.NoError(t, err, "a refused request still yields the admin's labels")
			require.Len(t, d.Errors, 1)
			for _, w := range tc.want {
				assert.Contains(t, d.Errors[0].Error(), w)
			}
			assert.Equal(t, "baseline", d.Labels["pod-security.kubernetes.io/enforce"])
			assert.Equal(t, "restricted", d.Labels["pod-security.kubernetes.io/audit"])
		})
	}
}

// Hold keeps the plugin's own level and a level found before the plugin's first run (the
// rollout), but not a level another writer put in place of the plugin's: holding that would keep
// a loosening for as long as one violating pod runs.
func TestPreflightHoldDoesNotKeepAForeignLoosening(t *testing.T) {
	p, err := pss.New(fixture.Config(t, "podSecurity: {enforce: {level: restricted}, preflight: hold}\n"))
	require.NoError(t, err)
	const enforce, audit = "pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/audit"
	for _, tc := range []struct {
		name     string
		managers map[string][]string
		held     bool
	}{
		{"the plugin's own level", map[string][]string{enforce: {"profile-plugins/pss"}, audit: {"profile-plugins/pss"}}, true},
		{"found at the first run", map[string][]string{enforce: {"kubeflow-profile-controller"}}, true},
		{"replaced after the plugin set it", map[string][]string{enforce: {"gitops"}, audit: {"profile-plugins/pss"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := plugin.Observed{Labels: map[string]string{enforce: "baseline"}, LabelManagers: tc.managers, Pods: []corev1.Pod{runAsRoot}}
			d, err := p.Generate(plugin.Target{Namespace: ns, Observed: obs})
			require.NoError(t, err)
			if tc.held {
				assert.Equal(t, "baseline", d.Labels[enforce])
				assert.NotEmpty(t, d.Waiting)
				return
			}
			assert.Equal(t, "restricted", d.Labels[enforce], "the admin's level, not the foreign loosening")
			assert.Empty(t, d.Waiting)
			require.Len(t, d.Warnings, 1)
			assert.Contains(t, d.Warnings[0], "gitops changed this one")
			assert.Contains(t, d.Warnings[0], "run-as-root (", "the violating pod is still named")
		})
	}
}
