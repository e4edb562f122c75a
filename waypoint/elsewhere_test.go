package waypoint_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// A namespace labelled istio.io/use-waypoint-namespace with another namespace is routed by Istio
// to a waypoint there, whose listener refuses it (allowedRoutes defaults to Same), so every
// request would meet the ztunnel policy and be refused while the Profile said all was applied
// (attack review of Dec 1, finding 3). The plugin withholds its routing labels and reports the
// label as an error; the namespace stays enrolled (and closed), the Gateway is still made.
func TestAWaypointNamespaceLabelNamingAnotherNamespaceWithholdsRoutingAndIsReported(t *testing.T) {
	cfg := config.Default()
	for _, other := range []string{"kubeflow", ""} {
		d := generate(t, cfg, map[string]string{"istio.io/use-waypoint-namespace": other, "istio.io/dataplane-mode": "ambient"}, programmed(cfg))
		require.Len(t, d.Errors, 1, "%q", other)
		msg := d.Errors[0].Error()
		assert.Contains(t, msg, `istio.io/use-waypoint-namespace="`+other+`" names another namespace than `+ns)
		assert.Contains(t, msg, "allowedRoutes")
		assert.Contains(t, msg, "withheld until the label is removed or names "+ns)
		assert.NotContains(t, d.Labels, "istio.io/use-waypoint", "routing is withheld")
		assert.NotContains(t, d.Labels, "istio.io/ingress-use-waypoint", "ingress routing is withheld")
		assert.Equal(t, "ambient", d.Labels["istio.io/dataplane-mode"], "the namespace stays enrolled, under its ztunnel policy")
		assert.NotNil(t, desiredGateway(t, d), "the waypoint is still made")
	}
}

// The label naming the namespace itself (as the profiles controller writes it without
// -waypoint-namespace) changes nothing, nor does its absence; in sidecar mode it routes nothing.
func TestAWaypointNamespaceLabelNamingTheNamespaceItselfIsFine(t *testing.T) {
	cfg := config.Default()
	for _, labels := range []map[string]string{{"istio.io/use-waypoint-namespace": ns}, nil} {
		d := generate(t, cfg, labels, programmed(cfg))
		assert.Empty(t, d.Errors, "%v", labels)
		assert.Equal(t, "waypoint", d.Labels["istio.io/use-waypoint"], "%v", labels)
		assert.Equal(t, "true", d.Labels["istio.io/ingress-use-waypoint"], "%v", labels)
	}
	sidecar := fixture.Config(t, "mesh: {mode: sidecar}\n")
	d := generate(t, sidecar, map[string]string{"istio.io/use-waypoint-namespace": "kubeflow"})
	assert.Empty(t, d.Errors, "sidecar mode sets no use-waypoint for the label to redirect")
}

// Every namespace label key the waypoint plugin may write, in every mode, is one a Pod Security
// override may not select on: its value follows the namespace's enrolment, not the admin (attack
// review of Dec 1, finding 1).
func TestEveryLabelTheWaypointPluginWritesIsRefusedInOverrideSelectors(t *testing.T) {
	keys := map[string]bool{}
	for _, body := range []string{"", "mesh: {revision: canary}\n", "mesh: {mode: sidecar}\n", "mesh: {mode: sidecar, revision: canary}\n"} {
		cfg := fixture.Config(t, body)
		for k := range generate(t, cfg, nil, programmed(cfg)).Labels {
			keys[k] = true
		}
		if cfg.Mesh.Mode == config.ModeAmbient {
			cfg.Mesh.Waypoint.Provision = config.ProvisionOnDemand
			d, err := waypoint.New(cfg).Generate(plugin.Target{Namespace: ns, Observed: plugin.Observed{Now: time.Unix(1_800_000_000, 0)}})
			require.NoError(t, err)
			require.Contains(t, d.Labels, waypoint.IdleSinceLabel)
			for k := range d.Labels {
				keys[k] = true
			}
		}
		p := waypoint.New(cfg)
		for k := range p.DataPlaneLabels() {
			keys[k] = true
		}
	}
	for _, k := range waypoint.EnrolmentLabels() {
		keys[k] = true
	}
	require.GreaterOrEqual(t, len(keys), 6, "dataplane-mode, use-waypoint, ingress-use-waypoint, istio-injection, istio.io/rev, waypoint-idle-since")
	for k := range keys {
		_, err := config.Parse([]byte("apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\n" +
			"podSecurity: {overrides: [{namespaceSelector: {matchLabels: {" + k + ": x}}, minimumEnforce: privileged}]}\n"))
		assert.ErrorContains(t, err, "matchLabels["+k+"]", k)
	}
}
