package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/runner/dryrun"
)

// Enrolment labels the waypoint plugin sets in ambient mode.
var enrolment = []string{"istio.io/dataplane-mode", "istio.io/use-waypoint", "istio.io/ingress-use-waypoint"}

// profileIn creates a Profile and its namespace (owned by annotation, as an admin would make it).
func profileIn(t *testing.T, c client.Client, name string) *profilev1.Profile {
	t.Helper()
	ctx := context.Background()
	const owner = "alice@example.com"
	p := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: profilev1.ProfileSpec{Owner: fixture.User(owner)}}
	require.NoError(t, c.Create(ctx, p))
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{ownership.OwnerAnnotation: owner}}}))
	return p
}

func runnerFor(t *testing.T, c client.Client, mode config.MeshMode) *runner.Runner {
	t.Helper()
	cfg := config.Default()
	cfg.Mesh.Mode = mode
	require.NoError(t, cfg.Validate())
	r, err := profileplugins.NewRunner(c, cfg)
	require.NoError(t, err)
	return r
}

func namespaceLabels(t *testing.T, c client.Client, name string) map[string]string {
	t.Helper()
	n := &corev1.Namespace{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: name}, n))
	return n.Labels
}

func exists(t *testing.T, c client.Client, obj client.Object, ns, name string) bool {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// converged applies until nothing is written and nothing waits, and returns the last Result.
func converged(t *testing.T, r *runner.Runner, p *profilev1.Profile) *runner.Result {
	t.Helper()
	var res *runner.Result
	for range 5 {
		res = r.Apply(context.Background(), p)
		require.NoError(t, res.Err())
		if !res.Changed() && len(res.Waiting()) == 0 {
			return res
		}
	}
	t.Fatalf("not converged after 5 calls: %s; waiting: %v", res, res.Waiting())
	return nil
}

// Sidecar mode writes no Gateway, so it needs no Gateway API: on an API server without those
// CRDs the namespace gets its labels and owner policy, and the Result is ready.
func TestSidecarModeConvergesWithoutTheGatewayAPI(t *testing.T) {
	env := envtest.StartWithout(t, envtest.GatewayAPI)
	c := env.Client
	p := profileIn(t, c, "sidecar-no-gw")
	res := converged(t, runnerFor(t, c, config.ModeSidecar), p)

	assert.Equal(t, "True", kubeflow.Condition(res).Status, kubeflow.Condition(res).Message)
	labels := namespaceLabels(t, c, p.Name)
	assert.Equal(t, "enabled", labels["istio-injection"])
	assert.Equal(t, "baseline", labels["pod-security.kubernetes.io/enforce"])
	owner := &istiosecurityv1.AuthorizationPolicy{}
	require.True(t, exists(t, c, owner, p.Name, config.DefaultOwnerPolicyName))
	assert.Empty(t, owner.Spec.TargetRefs, "in sidecar mode the owner policy applies to the pods")

	// Steady state: no write, and no more reads than with the Gateway API installed: the RESTMapper
	// asks discovery for the Gateway API again (plugin/served.go), instead of a list of Gateways.
	writes := env.Requests.Writes()
	reads := steadyStateReads(t, env, p)
	assert.Equal(t, writes, env.Requests.Writes())
	full := envtest.Start(t)
	withCRDs := profileIn(t, full.Client, "sidecar-with-gw")
	converged(t, runnerFor(t, full.Client, config.ModeSidecar), withCRDs)
	assert.Equal(t, steadyStateReads(t, full, withCRDs), reads)
}

// steadyStateReads is the number of GET requests of one sidecar-mode Apply.
func steadyStateReads(t *testing.T, env *envtest.Env, p *profilev1.Profile) int {
	t.Helper()
	gets := env.Requests.Get("GET")
	res := runnerFor(t, env.Client, config.ModeSidecar).Apply(context.Background(), p)
	require.NoError(t, res.Err())
	require.False(t, res.Changed())
	return env.Requests.Get("GET") - gets
}

// None mode writes nothing of Istio's or the Gateway API's: it converges on an API server
// without either set of CRDs.
func TestNoneModeConvergesWithoutTheGatewayAPIOrIstio(t *testing.T) {
	t.Parallel()
	for name, left := range map[string]envtest.CRDs{
		"without the Gateway API":          envtest.GatewayAPI,
		"without the Gateway API or Istio": envtest.GatewayAPI | envtest.Istio,
	} {
		t.Run(name, func(t *testing.T) {
			c := envtest.StartWithout(t, left).Client
			p := profileIn(t, c, "none-"+map[envtest.CRDs]string{envtest.GatewayAPI: "no-gw", envtest.GatewayAPI | envtest.Istio: "no-istio"}[left])
			res := converged(t, runnerFor(t, c, config.ModeNone), p)
			assert.Equal(t, "True", kubeflow.Condition(res).Status, kubeflow.Condition(res).Message)
			assert.Equal(t, "baseline", namespaceLabels(t, c, p.Name)["pod-security.kubernetes.io/enforce"])
		})
	}
}

// Sidecar mode writes the owner policy: without Istio's CRDs the access plugin fails and says
// which CRD to install, while Pod Security still applies.
func TestSidecarModeWithoutIstioNamesTheCRD(t *testing.T) {
	t.Parallel()
	c := envtest.StartWithout(t, envtest.GatewayAPI|envtest.Istio).Client
	p := profileIn(t, c, "sidecar-no-istio")
	res := runnerFor(t, c, config.ModeSidecar).Apply(context.Background(), p)
	require.Error(t, res.Err())
	assert.Contains(t, res.Err().Error(), "install the CRD authorizationpolicies.security.istio.io, version v1")
	assert.True(t, res.Retryable())
	assert.Equal(t, "baseline", namespaceLabels(t, c, p.Name)["pod-security.kubernetes.io/enforce"])
}

// Ambient mode needs its waypoint Gateway: without the Gateway API it fails loudly, naming the
// CRD, and never enrols the namespace, however often it is reconciled.
func TestAmbientModeWithoutTheGatewayAPIFailsClosed(t *testing.T) {
	t.Parallel()
	c := envtest.StartWithout(t, envtest.GatewayAPI).Client
	p := profileIn(t, c, "ambient-no-gw")
	r := runnerFor(t, c, config.ModeAmbient)
	for range 3 {
		res := r.Apply(context.Background(), p)
		require.Error(t, res.Err())
		assert.Contains(t, res.Err().Error(), "plugin waypoint: the API server does not serve the kind of Gateway.gateway.networking.k8s.io/waypoint "+
			"(install the CRD gateways.gateway.networking.k8s.io, version v1)")
		assert.True(t, res.Retryable(), "installing the CRD fixes it")
		assert.Equal(t, "False", kubeflow.Condition(res).Status)
		labels := namespaceLabels(t, c, p.Name)
		for _, k := range enrolment {
			assert.NotContains(t, labels, k)
		}
	}
	// The access policies protect as they would anyway: failing closed takes nothing away.
	assert.True(t, exists(t, c, &istiosecurityv1.AuthorizationPolicy{}, p.Name, config.DefaultZtunnelPolicyName))
}

// With the Gateway API installed, a Gateway an earlier ambient configuration made is pruned after
// a switch to sidecar mode.
func TestASwitchToSidecarPrunesTheWaypointWhenTheGatewayAPIIsThere(t *testing.T) {
	t.Parallel()
	c := envtest.Start(t).Client
	p := profileIn(t, c, "ambient-to-sidecar")
	res := runnerFor(t, c, config.ModeAmbient).Apply(context.Background(), p)
	require.NoError(t, res.Err())
	require.True(t, exists(t, c, &gatewayv1.Gateway{}, p.Name, "waypoint"), "ambient mode made the waypoint")

	res = converged(t, runnerFor(t, c, config.ModeSidecar), p)
	assert.Equal(t, "True", kubeflow.Condition(res).Status, kubeflow.Condition(res).Message)
	assert.False(t, exists(t, c, &gatewayv1.Gateway{}, p.Name, "waypoint"), "the waypoint of the ambient run is pruned")
	assert.False(t, exists(t, c, &corev1.ConfigMap{}, p.Name, "waypoint-seccomp"))
	assert.Equal(t, "enabled", namespaceLabels(t, c, p.Name)["istio-injection"])
}

// What is served is discovered on every reconcile, through the client's dynamic RESTMapper: the
// Gateway API installed later lets ambient mode proceed with the same runner, and removed later
// (the mapper still maps Gateways, the API server answers NotFound) it does not wedge a switch
// to sidecar mode.
func TestTheGatewayAPIInstalledOrRemovedLaterIsFollowed(t *testing.T) {
	t.Parallel()
	env := envtest.StartFresh(t, envtest.GatewayAPI) // its own: it installs and removes the Gateway API CRDs
	c := env.Client
	p := profileIn(t, c, "later")
	ambient := runnerFor(t, c, config.ModeAmbient)
	res := ambient.Apply(context.Background(), p)
	require.Error(t, res.Err())
	assert.Contains(t, res.Err().Error(), "install the CRD gateways.gateway.networking.k8s.io")

	env.InstallCRDs(t, envtest.GatewayAPI)
	res = ambient.Apply(context.Background(), p)
	require.NoError(t, res.Err())
	assert.True(t, exists(t, c, &gatewayv1.Gateway{}, p.Name, "waypoint"), "the same runner makes the waypoint once its CRD is served")
	assert.Equal(t, "ambient", namespaceLabels(t, c, p.Name)["istio.io/dataplane-mode"])

	env.UninstallCRDs(t, envtest.GatewayAPI)
	require.Eventually(t, func() bool {
		err := c.List(context.Background(), &gatewayv1.GatewayList{}, client.InNamespace(p.Name))
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond, "the API server stops serving Gateways")
	sidecar := runnerFor(t, c, config.ModeSidecar)
	res = converged(t, sidecar, p)
	assert.Equal(t, "True", kubeflow.Condition(res).Status, kubeflow.Condition(res).Message)
	labels := namespaceLabels(t, c, p.Name)
	assert.Equal(t, "enabled", labels["istio-injection"])
	assert.NotContains(t, labels, "istio.io/dataplane-mode")
}

// A dry run (what `plan` shows) answers as the real run would on such a cluster.
func TestADryRunWithoutTheGatewayAPIAnswersAsTheRunWould(t *testing.T) {
	t.Parallel()
	c := envtest.StartWithout(t, envtest.GatewayAPI).Client
	p := profileIn(t, c, "dry-run-no-gw")

	sidecar := runnerFor(t, c, config.ModeSidecar)
	res, writes := dryrun.Apply(context.Background(), sidecar, p)
	require.NoError(t, res.Err())
	assert.NotEmpty(t, writes, "the writes sidecar mode would make")

	ambient := runnerFor(t, c, config.ModeAmbient)
	res, _ = dryrun.Apply(context.Background(), ambient, p)
	require.Error(t, res.Err())
	assert.Contains(t, res.Err().Error(), "install the CRD gateways.gateway.networking.k8s.io")
	assert.NotContains(t, namespaceLabels(t, c, p.Name), "istio-injection", "a dry run persists nothing")
}
