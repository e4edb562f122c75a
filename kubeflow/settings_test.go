package kubeflow_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	securityv1beta1 "istio.io/api/security/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
)

// The profiles controller's flag defaults (kubeflow/dashboard components/profile-controller/main.go).
var controllerDefaults = kubeflow.ControllerSettings{
	UserIDHeader:    "x-goog-authenticated-user-email",
	UserIDPrefix:    "accounts.google.com:",
	ServiceMeshMode: "istio-sidecar",
	WaypointName:    "waypoint",
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestConfigFromControllerKeepsTheControllersMeaning(t *testing.T) {
	cfg, err := kubeflow.ConfigFromController(controllerDefaults)
	require.NoError(t, err)
	a := cfg.Authorization
	assert.Equal(t, "x-goog-authenticated-user-email", a.UserIDHeader, "an IAP deployment keeps its header")
	assert.Equal(t, "accounts.google.com:", a.UserIDPrefix)
	assert.Equal(t, config.ModeSidecar, cfg.Mesh.Mode, "the controller's default mode is sidecar")
	assert.Equal(t, "cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account", a.Principals.IngressGateway)

	s := controllerDefaults
	s.UserIDHeader, s.UserIDPrefix, s.ServiceMeshMode = "kubeflow-userid", "", "istio-ambient"
	s.Env = env(map[string]string{
		"ISTIO_INGRESS_GATEWAY_PRINCIPAL": "example.org/ns/gw/sa/ingress",
		"NOTEBOOK_CONTROLLER_PRINCIPAL":   "example.org/ns/kubeflow/sa/nb",
		"KFP_UI_PRINCIPAL":                "example.org/ns/kubeflow/sa/kfp",
	})
	cfg, err = kubeflow.ConfigFromController(s)
	require.NoError(t, err)
	a = cfg.Authorization
	assert.Equal(t, "kubeflow-userid", a.UserIDHeader, "Kubeflow's manifests")
	assert.Empty(t, a.UserIDPrefix)
	assert.Equal(t, config.ModeAmbient, cfg.Mesh.Mode)
	assert.Equal(t, "example.org/ns/gw/sa/ingress", a.Principals.IngressGateway)
	assert.Equal(t, "example.org/ns/kubeflow/sa/nb", a.Principals.NotebookController)
	assert.Equal(t, "example.org/ns/kubeflow/sa/kfp", a.Principals.PipelinesUI)
}

// With the Katib rule dropped, the owner policy is rule for rule the one the profiles controller
// writes (controllers/profile_controller.go, getAuthorizationPolicy) for its default flags.
func TestOwnerPolicyMatchesTheControllersForItsSettings(t *testing.T) {
	base := config.Default()
	base.Authorization.KatibRule = ptr.To(false)
	s := controllerDefaults
	s.Base = base
	cfg, err := kubeflow.ConfigFromController(s)
	require.NoError(t, err)
	pol, err := authz.OwnerPolicy(cfg, "alice", "alice@example.com")
	require.NoError(t, err)

	controllers := &securityv1beta1.AuthorizationPolicy{
		Action: securityv1beta1.AuthorizationPolicy_ALLOW,
		Rules: []*securityv1beta1.Rule{
			{
				When: []*securityv1beta1.Condition{{Key: "request.headers[x-goog-authenticated-user-email]", Values: []string{"accounts.google.com:alice@example.com"}}},
				From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{Principals: []string{
					"cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account", "cluster.local/ns/kubeflow/sa/ml-pipeline-ui",
				}}}},
			},
			{When: []*securityv1beta1.Condition{{Key: "source.namespace", Values: []string{"alice"}}}},
			{To: []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{Paths: []string{"/healthz", "/metrics", "/wait-for-drain"}}}}},
			{
				From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{Principals: []string{"cluster.local/ns/kubeflow/sa/notebook-controller-service-account"}}}},
				To:   []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{Methods: []string{"GET"}, Paths: []string{"*/api/kernels"}}}},
			},
		},
	}
	assert.True(t, proto.Equal(controllers, &pol.Spec), "got %v", &pol.Spec)

	base.Authorization.KatibRule = nil
	s.Base = base
	cfg, err = kubeflow.ConfigFromController(s)
	require.NoError(t, err)
	pol, err = authz.OwnerPolicy(cfg, "alice", "alice@example.com")
	require.NoError(t, err)
	require.Len(t, pol.Spec.Rules, 5, "by default the owner policy gains the Katib rule")
	assert.Equal(t, []string{"cluster.local/ns/kubeflow/sa/katib-controller"}, pol.Spec.Rules[4].From[0].Source.Principals)
}

func TestConfigFromControllerErrorsNameFieldAndSource(t *testing.T) {
	withBase := func(edit func(*config.Config)) *config.Config {
		c := config.Default()
		edit(c)
		return c
	}
	for _, tc := range []struct {
		name string
		s    kubeflow.ControllerSettings
		want []string
	}{
		{
			name: "mode",
			s:    kubeflow.ControllerSettings{UserIDHeader: "kubeflow-userid", ServiceMeshMode: "ambient"},
			want: []string{`-service-mesh-mode "ambient": must be "istio-sidecar" or "istio-ambient"`},
		},
		{
			name: "principal from the environment",
			s:    kubeflow.ControllerSettings{UserIDHeader: "kubeflow-userid", Env: env(map[string]string{"KFP_UI_PRINCIPAL": "ml-pipeline-ui"})},
			want: []string{`authorization.principals.pipelinesUI: Invalid value: "ml-pipeline-ui"`, "(from the controller's KFP_UI_PRINCIPAL)"},
		},
		{
			name: "header",
			s:    kubeflow.ControllerSettings{UserIDHeader: "kubeflow userid"},
			want: []string{`authorization.userIdHeader: Invalid value: "kubeflow userid"`, "(from the controller's -userid-header)"},
		},
		{
			name: "shared waypoint",
			s:    kubeflow.ControllerSettings{UserIDHeader: "kubeflow-userid", ServiceMeshMode: "istio-ambient", WaypointNamespace: "istio-system"},
			want: []string{`mesh.waypoint.namespace: Invalid value: "istio-system": a shared waypoint is not supported`, "(from the controller's -waypoint-namespace)"},
		},
		{
			name: "two places disagree",
			s: kubeflow.ControllerSettings{UserIDHeader: "x-goog-authenticated-user-email",
				Base: withBase(func(c *config.Config) { c.Authorization.UserIDHeader = "x-user" })},
			want: []string{`authorization.userIdHeader: Invalid value: "x-user": the PluginConfig sets it, but the controller's -userid-header is "x-goog-authenticated-user-email"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kubeflow.ConfigFromController(tc.s)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestConfigFromControllerLeavesBaseAlone(t *testing.T) {
	base := config.Default()
	base.Authorization.HealthPaths = []string{"/ready"}
	s := controllerDefaults
	s.Base = base
	cfg, err := kubeflow.ConfigFromController(s)
	require.NoError(t, err)
	assert.Equal(t, []string{"/ready"}, cfg.Authorization.HealthPaths, "other fields come from the base")
	cfg.Authorization.HealthPaths[0] = "/changed"
	assert.Equal(t, "/ready", base.Authorization.HealthPaths[0])
	assert.Equal(t, config.DefaultUserIDHeader, base.Authorization.UserIDHeader)
	assert.Equal(t, config.ModeAmbient, base.Mesh.Mode)
}

// The default platform callers are built from the principals, so the controller's principals reach
// the owner policy through them; a list the admin wrote is kept, and a controller principal that
// it would ignore is an error naming the variable.
func TestConfigFromControllerPrincipalsReachTheCallers(t *testing.T) {
	s := controllerDefaults
	s.Env = env(map[string]string{"NOTEBOOK_CONTROLLER_PRINCIPAL": "cluster.local/ns/notebooks/sa/nb", "KFP_UI_PRINCIPAL": "cluster.local/ns/pipelines/sa/ui"})
	cfg, err := kubeflow.ConfigFromController(s)
	require.NoError(t, err)
	pol, err := authz.OwnerPolicy(cfg, "alice", "alice@example.com")
	require.NoError(t, err)
	assert.Equal(t, []string{"cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account", "cluster.local/ns/pipelines/sa/ui"},
		pol.Spec.Rules[0].From[0].Source.Principals)
	assert.Equal(t, []string{"cluster.local/ns/notebooks/sa/nb"}, pol.Spec.Rules[3].From[0].Source.Principals)
	assert.Contains(t, cfg.ReservedNamespaces(), "notebooks")

	base, err := config.Parse([]byte("apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + `
authorization:
  platformCallers: [{name: ui, principal: cluster.local/ns/kubeflow/sa/ml-pipeline-ui, onBehalfOfUser: true}]
`))
	require.NoError(t, err)
	s = controllerDefaults
	s.Base = base
	cfg, err = kubeflow.ConfigFromController(s)
	require.NoError(t, err)
	assert.Equal(t, base.Authorization.PlatformCallers, cfg.Authorization.PlatformCallers, "the admin's list is kept")

	s.Env = env(map[string]string{"KFP_UI_PRINCIPAL": "cluster.local/ns/pipelines/sa/ui"})
	_, err = kubeflow.ConfigFromController(s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `authorization.principals.pipelinesUI: Invalid value: "cluster.local/ns/pipelines/sa/ui"`)
	assert.Contains(t, err.Error(), "platformCallers is set, so it wins")
	assert.Contains(t, err.Error(), "(from the controller's KFP_UI_PRINCIPAL)")
}

// Callers defaulted without the Katib entry (katibRule: false) are default-shaped too: they follow
// the controller's principals, and gain no Katib entry.
func TestConfigFromControllerPrincipalsReachTheCallersWithoutKatib(t *testing.T) {
	base, err := config.Parse([]byte("apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\nauthorization: {katibRule: false}\n"))
	require.NoError(t, err)
	s := controllerDefaults
	s.Base = base
	s.Env = env(map[string]string{"NOTEBOOK_CONTROLLER_PRINCIPAL": "cluster.local/ns/notebooks/sa/nb"})
	cfg, err := kubeflow.ConfigFromController(s)
	require.NoError(t, err)

	var principals []string
	for _, c := range cfg.Authorization.PlatformCallers {
		assert.NotEqual(t, config.CallerKatibController, c.Name)
		principals = append(principals, c.Principal)
	}
	assert.Contains(t, principals, "cluster.local/ns/notebooks/sa/nb", "the callers follow the controller's principal")
	assert.NotEqual(t, base.Authorization.PlatformCallers, cfg.Authorization.PlatformCallers)
}
