package kubeflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
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
	c := fake.NewClientBuilder().WithScheme(controllerScheme(t)).WithReturnManagedFields().
		WithObjects(append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alice",
			// As the profiles controller creates it: owner annotation and the Profile as controller.
			Annotations:     map[string]string{ownership.OwnerAnnotation: "alice@example.com"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "alice", UID: "u-1", Controller: &isController}},
		}})...).Build()
	runner, err := profileplugins.NewRunner(c, profileplugins.DefaultConfig())
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

func TestInputErrorsAreTerminal(t *testing.T) {
	in, _ := newIntegration(t)
	_, err := in.Apply(context.Background(), aliceProfile("alice@example.com "))
	require.Error(t, err)
	assert.True(t, errors.Is(err, reconcile.TerminalError(nil)), "an invalid owner is not retried: %v", err)
}

func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		name     string
		res      runner.Result
		want     ctrl.Result
		terminal bool
		err      bool
	}{
		{name: "done", res: runner.Result{Plugins: []runner.PluginResult{{Plugin: "a"}}}},
		{name: "waiting", res: runner.Result{WaitRequeue: 7, Plugins: []runner.PluginResult{{Plugin: "a", Waiting: []string{"w"}}}}, want: ctrl.Result{RequeueAfter: 7}},
		{name: "conflict", res: runner.Result{Plugins: []runner.PluginResult{{Plugin: "a", Errors: []error{&runner.ConflictError{Plugin: "a"}}}}}, err: true, terminal: true},
		{name: "api error", res: runner.Result{Errors: []error{errors.New("timeout")}}, err: true},
		{name: "api and input error", res: runner.Result{Errors: []error{errors.New("timeout")}, Plugins: []runner.PluginResult{{Plugin: "a", Errors: []error{&runner.ConflictError{Plugin: "a"}}}}}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := kubeflow.Outcome(&tc.res)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.err, err != nil, "error: %v", err)
			assert.Equal(t, tc.terminal, errors.Is(err, reconcile.TerminalError(nil)), "terminal: %v", err)
		})
	}
}

func TestProfileFromRefusesOtherKinds(t *testing.T) {
	_, err := kubeflow.ProfileFrom(controllerScheme(t), &corev1.ConfigMap{})
	require.ErrorContains(t, err, "not Profile.kubeflow.org")
	p, err := kubeflow.ProfileFrom(controllerScheme(t), aliceProfile("alice@example.com"))
	require.NoError(t, err)
	assert.Equal(t, "alice@example.com", p.Spec.Owner.Name)
	assert.Equal(t, "u-1", string(p.UID))
}
