package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// The guard's defaults are the deployment's ServiceAccount, the documented break-glass group and
// istiod; every bad name is refused with its field path and value.
func TestGuardDefaultsAndValidation(t *testing.T) {
	cfg := config.Default()
	assert.Equal(t, "kubeflow/profile-plugins", cfg.Guard.ControllerServiceAccount)
	assert.Equal(t, "profile-plugins.kubeflow-ambient.io:break-glass", cfg.Guard.BreakGlassGroup)
	assert.Equal(t, []string{"istio-system/istiod"}, cfg.Guard.MeshServiceAccounts)
	require.NoError(t, cfg.Validate())

	for want, edit := range map[string]func(*config.Guard){
		`guard.controllerServiceAccount: Invalid value: "kubeflow": must be namespace/name`: func(g *config.Guard) { g.ControllerServiceAccount = "kubeflow" },
		`guard.controllerServiceAccount: Invalid value: "Kube_flow/x": namespace:`:          func(g *config.Guard) { g.ControllerServiceAccount = "Kube_flow/x" },
		`guard.breakGlassGroup: Invalid value: "ad'min"`:                                    func(g *config.Guard) { g.BreakGlassGroup = "ad'min" },
		`guard.meshServiceAccounts[0]: Invalid value: "istiod": must be namespace/name`:     func(g *config.Guard) { g.MeshServiceAccounts = []string{"istiod"} },
		`guard.optOutAllowed[0]: Invalid value: "alice/": name:`:                            func(g *config.Guard) { g.OptOutAllowed = []config.OptOut{{Namespace: "alice"}} },
	} {
		cfg := config.Default()
		edit(&cfg.Guard)
		assert.ErrorContains(t, cfg.Validate(), want)
	}
}

// A revisioned istiod runs as istiod-<revision> (Istio's chart), which the guard must let write
// the waypoint's objects.
func TestTheGuardTrustsTheRevisionsIstiod(t *testing.T) {
	c, err := config.Parse([]byte(header + "mesh: {revision: 1-30}\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"istio-system/istiod-1-30"}, c.Guard.MeshServiceAccounts)
}

// A break-glass group everyone is in, or a waypoint named as the ServiceAccounts every Profile's
// namespace has, are refused with the field's path.
func TestGuardIdentitiesNobodyOrEverybodyHasAreRefused(t *testing.T) {
	for body, want := range map[string]string{
		"guard: {breakGlassGroup: system:authenticated}\n":                "guard.breakGlassGroup",
		"guard: {breakGlassGroup: 'system:serviceaccounts:team'}\n":       "guard.breakGlassGroup",
		"guard: {meshConfigAllowed: [{kind: Gateway, name: waypoint}]}\n": "guard.meshConfigAllowed[0].name",
		"mesh: {waypoint: {name: default-editor}}\n":                      "mesh.waypoint.name",
	} {
		_, err := config.Parse([]byte(header + body))
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), want, body)
	}
}

// Katib's controller is kubeflow/katib-controller unless the admin names another or turns the
// exemption of its suggestions off with ""; a bad name is refused with the field and the value,
// and its namespace is reserved like every identity the guard trusts.
func TestKatibControllerServiceAccountDefaultsValidationAndOff(t *testing.T) {
	def := config.Default()
	assert.Equal(t, "kubeflow/katib-controller", def.Guard.KatibController())

	off, err := config.Parse([]byte(header + "guard: {katibControllerServiceAccount: ''}\n"))
	require.NoError(t, err)
	assert.Empty(t, off.Guard.KatibController(), "an empty name turns the exemption off")

	other, err := config.Parse([]byte(header + "guard: {katibControllerServiceAccount: katib/controller}\n"))
	require.NoError(t, err)
	assert.Equal(t, "katib/controller", other.Guard.KatibController())
	assert.Contains(t, other.ReservedNamespaces(), "katib", "its namespace may be no Profile's")

	for value, want := range map[string]string{
		"katib-controller":  `guard.katibControllerServiceAccount: Invalid value: "katib-controller": must be namespace/name`,
		"Kube_flow/katib":   `guard.katibControllerServiceAccount: Invalid value: "Kube_flow/katib": namespace:`,
		"kubeflow/Katib_Ct": `guard.katibControllerServiceAccount: Invalid value: "kubeflow/Katib_Ct": name:`,
	} {
		_, err := config.Parse([]byte(header + "guard: {katibControllerServiceAccount: " + value + "}\n"))
		require.Error(t, err, value)
		assert.Contains(t, err.Error(), want)
	}
}
