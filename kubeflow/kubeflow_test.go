package kubeflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// controllerProfile stands in for the profiles controller's own Profile type: a different Go
// type with the same JSON form, registered for the same kind.
type controllerProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Owner   rbacv1.Subject     `json:"owner,omitempty"`
		Plugins []profilev1.Plugin `json:"plugins,omitempty"`
	} `json:"spec,omitempty"`
}

func (p *controllerProfile) DeepCopyObject() runtime.Object {
	c := *p
	p.DeepCopyInto(&c.ObjectMeta)
	return &c
}

func controllerScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "Profile"}, &controllerProfile{})
	require.NoError(t, profileplugins.AddToScheme(s), "the plugins' types must not clash with the controller's Profile")
	return s
}

func newIntegration(t *testing.T, objs ...client.Object) (*kubeflow.Integration, client.Client) {
	return newIntegrationFor(t, profileplugins.DefaultConfig(), objs...)
}

// newIntegrationFor is newIntegration for the plugin configuration cfg.
func newIntegrationFor(t *testing.T, cfg *config.Config, objs ...client.Object) (*kubeflow.Integration, client.Client) {
	c := fake.NewClientBuilder().WithScheme(controllerScheme(t)).WithReturnManagedFields().
		WithObjects(append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alice",
			// As the profiles controller creates it: owner annotation and the Profile as controller.
			Annotations:     map[string]string{ownership.OwnerAnnotation: "alice@example.com"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "alice", UID: "u-1", Controller: &isController}},
		}})...).Build()
	runner, err := profileplugins.NewRunner(c, cfg)
	require.NoError(t, err)
	return &kubeflow.Integration{Runner: runner}, c
}

var isController = true

func aliceProfile(owner string) *controllerProfile {
	p := &controllerProfile{ObjectMeta: metav1.ObjectMeta{Name: "alice", UID: "u-1"}}
	p.Spec.Owner = rbacv1.Subject{Kind: "User", Name: owner}
	return p
}

func TestApplyWaitsWithoutAnError(t *testing.T) {
	in, c := newIntegration(t)
	res, err := in.Apply(context.Background(), aliceProfile("alice@example.com"))
	require.NoError(t, err, "a waypoint that is not Programmed yet is not a failure")
	assert.Equal(t, runner.DefaultWaitRequeue, res.RequeueAfter)

	ns := &corev1.Namespace{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "alice"}, ns))
	assert.Equal(t, "ambient", ns.Labels["istio.io/dataplane-mode"])

	res, err = in.Revoke(context.Background(), aliceProfile("alice@example.com"))
	require.NoError(t, err)
	assert.Zero(t, res)
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "alice"}, ns))
	assert.NotContains(t, ns.Labels, "istio.io/dataplane-mode")
	_, err = in.Revoke(context.Background(), aliceProfile("alice@example.com"))
	require.NoError(t, err, "revoke is idempotent")
}

// sidecarConfig is a configuration in which nothing waits for a waypoint.
func sidecarConfig(t *testing.T) *config.Config {
	cfg := profileplugins.DefaultConfig()
	cfg.Mesh.Mode = config.ModeSidecar
	require.NoError(t, cfg.Validate())
	return cfg
}

func TestInputErrorsAreTerminal(t *testing.T) {
	in, _ := newIntegrationFor(t, sidecarConfig(t))
	res, err := in.Apply(context.Background(), aliceProfile("alice@example.com "))
	require.Error(t, err)
	assert.True(t, errors.Is(err, reconcile.TerminalError(nil)), "an invalid owner is not retried: %v", err)
	assert.Zero(t, res)
}

// controller-runtime ignores RequeueAfter next to any error, so an input error while a plugin
// waits is a requeue with a nil error: the wait is not lost, and the error is still not retried.
func TestInputErrorWhileWaitingKeepsTheRequeue(t *testing.T) {
	in, _ := newIntegration(t)
	var cond profilev1.ProfileCondition
	in.AfterApply = func(_ context.Context, _ client.Object, res *runner.Result) error {
		cond = kubeflow.Condition(res)
		return nil
	}
	res, err := in.Apply(context.Background(), aliceProfile("alice@example.com "))
	require.NoError(t, err)
	assert.Equal(t, runner.DefaultWaitRequeue, res.RequeueAfter, "the waypoint is not Programmed")
	assert.Equal(t, "False", cond.Status)
	assert.Contains(t, cond.Message, "spec.owner.name", "the refusal is in the condition")
}

// AfterApply sees every Apply's Result, a refused one included, so a controller writes the
// condition before a terminal error; its own failure is returned for a retry, never as terminal.
func TestAfterApplyRunsBeforeEveryOutcomeAndItsErrorIsRetried(t *testing.T) {
	in, _ := newIntegrationFor(t, sidecarConfig(t))
	var seen []string
	in.AfterApply = func(_ context.Context, profile client.Object, res *runner.Result) error {
		seen = append(seen, profile.GetName()+" "+kubeflow.Condition(res).Status)
		return nil
	}
	_, err := in.Apply(context.Background(), aliceProfile("alice@example.com "))
	require.ErrorIs(t, err, reconcile.TerminalError(nil), "an invalid owner is terminal")
	assert.Equal(t, []string{"alice False"}, seen, "the refused Result reaches the hook first")

	down := apierrors.NewServiceUnavailable("status write refused")
	in.AfterApply = func(context.Context, client.Object, *runner.Result) error { return down }
	_, err = in.Apply(context.Background(), aliceProfile("alice@example.com "))
	require.ErrorIs(t, err, down)
	assert.False(t, errors.Is(err, reconcile.TerminalError(nil)), "a failed status write is retried: %v", err)
	assert.ErrorContains(t, err, `profile "alice"`)

	in.AfterApply = func(context.Context, client.Object, *runner.Result) error {
		t.Error("Revoke must not call AfterApply")
		return nil
	}
	_, err = in.Revoke(context.Background(), aliceProfile("alice@example.com"))
	require.NoError(t, err)
}

func TestProfileFromRefusesOtherKinds(t *testing.T) {
	_, err := kubeflow.ProfileFrom(controllerScheme(t), &corev1.ConfigMap{})
	require.ErrorContains(t, err, "not Profile.kubeflow.org")
	p, err := kubeflow.ProfileFrom(controllerScheme(t), aliceProfile("alice@example.com"))
	require.NoError(t, err)
	assert.Equal(t, "alice@example.com", p.Spec.Owner.Name)
	assert.Equal(t, "u-1", string(p.UID))
}
