package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// From the security review (branch attack), a careless admin; fails closed, but bad input must be
// refused. In ambient mode the ztunnel policy deliberately does not admit the ingress gateway, so
// every request from the Kubeflow UI must come through the waypoint. Two values make that
// impossible, so every user namespace denies the dashboard, notebooks and pipelines UI:
//   - mesh.ingressUseWaypoint: false: the ingress gateway sends requests straight to the pods,
//     where ztunnel denies its principal;
//   - mesh.waypoint.for: workload: the waypoint takes no Service traffic, and gateways send only
//     Service (VIP) traffic to waypoints, so the ingress again goes straight to the pods.
func TestAmbientConfigThatLocksOutTheIngressIsRefused(t *testing.T) {
	for name, mutate := range map[string]func(*config.Config){
		"mesh.ingressUseWaypoint": func(c *config.Config) { c.Mesh.IngressUseWaypoint = new(bool) },
		"mesh.waypoint.for":       func(c *config.Config) { c.Mesh.Waypoint.For = "workload" },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			mutate(cfg)
			err := cfg.Validate()
			if assert.Error(t, err, "an ambient configuration in which the ingress can never reach a user pod is accepted") {
				assert.Contains(t, err.Error(), name)
			}
			// The same values mean nothing outside ambient mode and stay valid there.
			cfg.Mesh.Mode = config.ModeSidecar
			assert.NoError(t, cfg.Validate())
		})
	}
}

// From the security review (branch attack), fail-open by configuration. The owner and contributor
// policies admit two principals only together with the user-id header: the ingress gateway and the
// Pipelines UI (which forwards requests for any user id). An L4 exception for the Pipelines UI (its
// namespace kubeflow, the first thing an admin adds when the UI "cannot reach" ambient namespaces,
// its principal or its service account) would make every user namespace's ztunnel policy admit the
// UI directly to every pod with no header check: any user's request proxied by the UI would reach
// any namespace. Validation refuses it, as it does for the ingress gateway, naming the field.
func TestL4ExceptionForThePipelinesUIIsRefused(t *testing.T) {
	for field, e := range map[string]config.L4Exception{
		"authorization.l4Exceptions[0].namespaces[0]":      {Namespaces: []string{"kubeflow"}},
		"authorization.l4Exceptions[0].principals[0]":      {Principals: []string{"cluster.local/ns/kubeflow/sa/ml-pipeline-ui"}},
		"authorization.l4Exceptions[0].serviceAccounts[0]": {ServiceAccounts: []string{"kubeflow/ml-pipeline-ui"}},
	} {
		t.Run(field, func(t *testing.T) {
			cfg := config.Default()
			cfg.Authorization.L4Exceptions = []config.L4Exception{e}
			err := cfg.Validate()
			if assert.Error(t, err, "the Pipelines UI may skip the owner's header check at the waypoint") {
				assert.Contains(t, err.Error(), field)
				assert.Contains(t, err.Error(), `platform caller "pipelines-ui"`)
			}
		})
	}
	// Another kubeflow component, admitted by its own principal, is still fine.
	cfg := config.Default()
	cfg.Authorization.L4Exceptions = []config.L4Exception{{Principals: []string{"cluster.local/ns/kubeflow/sa/metrics-scraper"}}}
	assert.NoError(t, cfg.Validate())
}
