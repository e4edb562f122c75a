package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

func TestMain(m *testing.M) { envtest.Main(m) }

// wait is long because the machines that run the tests are shared: a reconcile takes well under a
// second when nothing else runs.
const (
	wait = 60 * time.Second
	tick = 100 * time.Millisecond
)

// The fork's program against a real API server: a new Profile gets its namespace, the finalizer
// and the plugins' objects; the use-waypoint label once istiod (played by the test) programs the
// waypoint, which the Gateway watch notices; and on deletion the plugins revoke what they made
// before the finalizer goes.
func TestForkAppliesAndRevokesThroughItsReconciler(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, env.Base, options{metricsAddr: "0", controller: kubeflow.ControllerSettings{
			ServiceMeshMode: kubeflow.ServiceMeshAmbient, UserIDHeader: "kubeflow-userid"}})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the manager stopped with: %v", err)
		}
	})

	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "fork-alice"},
		Spec: profilev1.ProfileSpec{Owner: fixture.User("alice@example.com")}}
	require.NoError(t, c.Create(ctx, profile))

	ns := &corev1.Namespace{}
	require.Eventually(t, func() bool {
		return c.Get(ctx, client.ObjectKey{Name: profile.Name}, ns) == nil && ns.Labels["istio.io/dataplane-mode"] == "ambient"
	}, wait, tick, "the namespace is made and enrolled, closed by the ztunnel policy")
	assert.Equal(t, "alice@example.com", ns.Annotations[ownership.OwnerAnnotation])
	assert.NotContains(t, ns.Labels, "istio.io/use-waypoint", "no route to a waypoint istiod has not programmed")
	owner := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: profile.Name, Name: config.DefaultOwnerPolicyName}, owner))
	require.NotEmpty(t, owner.Spec.Rules)
	require.NotEmpty(t, owner.Spec.Rules[0].When)
	assert.Equal(t, "request.headers[kubeflow-userid]", owner.Spec.Rules[0].When[0].Key, "the controller's -userid-header")
	assert.Equal(t, []string{"alice@example.com"}, owner.Spec.Rules[0].When[0].Values, "the controller's -userid-prefix, empty")
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: profile.Name}, profile))
	assert.Contains(t, profile.Finalizers, profileFinalizer)

	gw := &gatewayv1.Gateway{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: profile.Name, Name: "waypoint"}, gw))
	gw.Status.Conditions = []metav1.Condition{{Type: string(gatewayv1.GatewayConditionProgrammed), Status: metav1.ConditionTrue,
		Reason: string(gatewayv1.GatewayReasonProgrammed), ObservedGeneration: gw.Generation, LastTransitionTime: metav1.Now()}}
	gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: ptr.To(gatewayv1.IPAddressType), Value: "10.96.0.20"}}
	require.NoError(t, c.Status().Update(ctx, gw, client.FieldOwner("istiod")))
	require.Eventually(t, func() bool {
		return c.Get(ctx, client.ObjectKey{Name: profile.Name}, ns) == nil && ns.Labels["istio.io/use-waypoint"] == "waypoint"
	}, wait, tick, "the Gateway watch brings the Profile back once its waypoint is Programmed")

	require.NoError(t, c.Delete(ctx, profile))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: profile.Name}, &profilev1.Profile{}))
	}, wait, tick, "the finalizer goes once the plugins have revoked")
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: profile.Name}, ns))
	assert.NotContains(t, ns.Labels, "istio.io/dataplane-mode")
	assert.NotContains(t, ns.Labels, "istio.io/use-waypoint")
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: profile.Name, Name: config.DefaultOwnerPolicyName}, owner)),
		"the owner policy is revoked")
}

// A Profile named like a namespace the configuration reserves gets no namespace from the fork, and
// the runner refuses it with a terminal error rather than writing there.
func TestForkCreatesNoReservedNamespace(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	cfg := config.Default()
	cfg.Namespaces.Reserved = []string{"platform-tools"}
	runner, err := profileplugins.NewRunner(c, cfg)
	require.NoError(t, err)
	r := &ProfileReconciler{Client: c, Mesh: &kubeflow.Integration{Runner: runner}}
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "platform-tools"},
		Spec: profilev1.ProfileSpec{Owner: fixture.User("mallory@example.com")}}
	require.NoError(t, c.Create(context.Background(), profile))

	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(profile)})
	require.ErrorIs(t, err, ownership.ErrNamespaceRefused)
	assert.True(t, apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKey{Name: profile.Name}, &corev1.Namespace{})))
}
