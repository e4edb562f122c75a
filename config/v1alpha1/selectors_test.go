package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	psaapi "k8s.io/pod-security-admission/api"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

func parseOverride(selector string) (*config.Config, error) {
	return config.Parse([]byte(header + "podSecurity: {overrides: [{namespaceSelector: " + selector + ", minimumEnforce: privileged}]}\n"))
}

// A Pod Security override may select only on labels the admin sets. The API server labels every
// namespace kubernetes.io/metadata.name=<name>, and the name is the Profile's, which a user picks
// when registering: an override on it hands the looser level to whoever registers the name first
// (attack review of Dec 1, finding 1). The profiles controller derives istio.io/use-waypoint-namespace
// from the name too, and the plugins' own labels follow the Profile. Each is refused in matchLabels
// and in matchExpressions, whatever the operator, with the field path of the key.
func TestOverrideSelectorsRefuseLabelsThatFollowTheProfile(t *testing.T) {
	cases := []struct {
		name, selector string
		want           []string
	}{
		{"the name label", "{matchLabels: {kubernetes.io/metadata.name: team-gpu}}",
			[]string{`podSecurity.overrides[0].namespaceSelector.matchLabels[kubernetes.io/metadata.name]`, "sets this label on every namespace to its name", "registers"}},
		{"the name label in an expression", "{matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [team-gpu]}]}",
			[]string{`podSecurity.overrides[0].namespaceSelector.matchExpressions[0].key`, `"kubernetes.io/metadata.name"`, "registers"}},
		{"the name label negated", "{matchExpressions: [{key: example.com/tier, operator: Exists}, {key: kubernetes.io/metadata.name, operator: NotIn, values: [kubeflow]}]}",
			[]string{`podSecurity.overrides[0].namespaceSelector.matchExpressions[1].key`}},
		{"the name label beside an admin label", "{matchLabels: {example.com/tier: gpu, kubernetes.io/metadata.name: team-gpu}}",
			[]string{`matchLabels[kubernetes.io/metadata.name]`}},
		{"the waypoint namespace the profiles controller derives from the name", "{matchLabels: {istio.io/use-waypoint-namespace: team-gpu}}",
			[]string{`matchLabels[istio.io/use-waypoint-namespace]`, "profiles controller", "Profile's name"}},
		{"the plugins' enrolment label", "{matchLabels: {istio.io/dataplane-mode: ambient}}",
			[]string{`matchLabels[istio.io/dataplane-mode]`, "written by the plugins"}},
		{"the plugins' routing label", "{matchExpressions: [{key: istio.io/use-waypoint, operator: Exists}]}",
			[]string{`matchExpressions[0].key`, `"istio.io/use-waypoint"`, "written by the plugins"}},
		{"the plugins' ingress routing label", "{matchLabels: {istio.io/ingress-use-waypoint: 'true'}}", []string{`matchLabels[istio.io/ingress-use-waypoint]`}},
		{"the plugins' revision label", "{matchLabels: {istio.io/rev: canary}}", []string{`matchLabels[istio.io/rev]`}},
		{"the plugins' injection label", "{matchLabels: {istio-injection: enabled}}", []string{`matchLabels[istio-injection]`}},
		{"a Pod Security label", "{matchLabels: {pod-security.kubernetes.io/enforce: privileged}}",
			[]string{`matchLabels[pod-security.kubernetes.io/enforce]`, "lets the Profile choose"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseOverride(tc.selector)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// Every Pod Security label key is refused, as is every key under its prefix.
func TestOverrideSelectorsRefuseEveryPodSecurityLabel(t *testing.T) {
	for _, k := range []string{psaapi.EnforceLevelLabel, psaapi.EnforceVersionLabel, psaapi.AuditLevelLabel,
		psaapi.AuditVersionLabel, psaapi.WarnLevelLabel, psaapi.WarnVersionLabel, "pod-security.kubernetes.io/future"} {
		_, err := parseOverride("{matchLabels: {" + k + ": x}}")
		assert.ErrorContains(t, err, "matchLabels["+k+"]", k)
	}
}

// Labels the admin sets, including the stock namespace-labels.yaml ones the profiles controller
// copies with fixed values, and look-alikes of the refused keys, still select.
func TestOverrideSelectorsAcceptTheAdminsLabels(t *testing.T) {
	for _, sel := range []string{
		"{matchLabels: {example.com/tier: gpu}}",
		"{matchLabels: {app.kubernetes.io/part-of: kubeflow-profile}}",
		"{matchExpressions: [{key: example.com/tier, operator: In, values: [gpu, system]}]}",
		"{matchLabels: {example.com/metadata.name: team-gpu}}",
		"{matchLabels: {kubernetes.io/metadata.namespace: x}}",
		"{matchLabels: {istio.io/use-waypoint-namespaces: x}}",
		"{matchLabels: {security.example.com/pod-security.kubernetes.io-enforce: x}}",
	} {
		c, err := parseOverride(sel)
		require.NoError(t, err, sel)
		assert.Len(t, c.PodSecurity.Overrides, 1, sel)
	}
}

// Every refused key is reported, each at its own path, in a stable order.
func TestOverrideSelectorRefusalsNameEachKey(t *testing.T) {
	_, err := parseOverride("{matchLabels: {kubernetes.io/metadata.name: a, istio.io/rev: b}, matchExpressions: [{key: istio-injection, operator: Exists}]}")
	require.Error(t, err)
	msg := err.Error()
	first := strings.Index(msg, "matchLabels[istio.io/rev]")
	second := strings.Index(msg, "matchLabels[kubernetes.io/metadata.name]")
	third := strings.Index(msg, "matchExpressions[0].key")
	require.True(t, first >= 0 && second >= 0 && third >= 0, msg)
	assert.Less(t, first, second, "matchLabels are reported in key order")
	assert.Less(t, second, third, "matchLabels before matchExpressions")
}

// A negative selector on the admin's own label (NotIn, DoesNotExist) matches every namespace the
// admin has not labelled, so every Profile registered later (second attack review of Dec 1,
// finding 3): refused with the operator's field path. In and Exists on the same label validate.
func TestOverrideSelectorsRefuseNegativeOperators(t *testing.T) {
	for _, sel := range []string{
		"{matchExpressions: [{key: example.com/tier, operator: DoesNotExist}]}",
		"{matchExpressions: [{key: example.com/tier, operator: Exists}, {key: example.com/team, operator: NotIn, values: [ops]}]}",
	} {
		_, err := parseOverride(sel)
		require.Error(t, err, sel)
		assert.Contains(t, err.Error(), "podSecurity.overrides[0].namespaceSelector.matchExpressions[")
		assert.Contains(t, err.Error(), "].operator")
		assert.Contains(t, err.Error(), "every namespace the admin has not labelled")
	}
	for _, sel := range []string{
		"{matchExpressions: [{key: example.com/tier, operator: Exists}]}",
		"{matchExpressions: [{key: example.com/tier, operator: In, values: [gpu]}]}",
	} {
		_, err := parseOverride(sel)
		assert.NoError(t, err, sel)
	}
}
