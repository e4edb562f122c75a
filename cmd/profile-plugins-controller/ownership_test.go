package main

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// nsState is everything in a namespace the plugins could write: the namespace itself (its
// resourceVersion moves on any write) and the objects of the plugins' kinds.
type nsState struct {
	exists          bool
	resourceVersion string
	labels          map[string]string
	objects         []string
}

func (h *harness) state(name string) nsState {
	h.t.Helper()
	ctx := context.Background()
	n := &corev1.Namespace{}
	err := h.env.Client.Get(ctx, client.ObjectKey{Name: name}, n)
	if apierrors.IsNotFound(err) {
		return nsState{}
	}
	require.NoError(h.t, err)
	s := nsState{exists: true, resourceVersion: n.ResourceVersion, labels: n.Labels}
	for kind, list := range map[string]client.ObjectList{
		"AuthorizationPolicy": &istiosecurityv1.AuthorizationPolicyList{}, "Gateway": &gatewayv1.GatewayList{}, "ConfigMap": &corev1.ConfigMapList{},
	} {
		require.NoError(h.t, h.env.Client.List(ctx, list, client.InNamespace(name)))
		items, err := meta.ExtractList(list)
		require.NoError(h.t, err)
		for _, it := range items {
			o := it.(client.Object)
			s.objects = append(s.objects, kind+"/"+o.GetName()+"@"+o.GetResourceVersion())
		}
	}
	slices.Sort(s.objects)
	return s
}

// refusedProfile reconciles a Profile whose namespace is not its own, then deletes it, and checks
// that neither reached the namespace and that the condition and an event say why.
func refusedProfile(t *testing.T, h *harness, name, owner, wantRule string) {
	t.Helper()
	rec := events.NewFakeRecorder(100)
	h.r.Recorder = rec
	before := h.state(name)

	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	require.ErrorIs(t, err, reconcile.TerminalError(nil), "a refusal is an input error: reported, never retried")
	assert.Zero(t, res.RequeueAfter)
	assert.Equal(t, before, h.state(name), "no write may reach namespace %q", name)

	cond := h.profile(name).Status.Conditions
	require.Len(t, cond, 1)
	assert.Equal(t, "False", cond[0].Status)
	assert.Contains(t, cond[0].Message, `namespace "`+name+`" is not written for profile "`+name+`"`)
	assert.Contains(t, cond[0].Message, wantRule)
	require.NotEmpty(t, rec.Events)
	assert.Contains(t, <-rec.Events, wantRule, "the event says why too")

	// Deleting the Profile completes (Revoke succeeds) and still does not touch the namespace.
	require.NoError(t, h.env.Client.Delete(context.Background(), h.profile(name)))
	h.reconcile(name)
	assert.False(t, h.exists(&profilev1.Profile{}, "", name), "the finalizer is removed: revoke did not block deletion")
	assert.Equal(t, before, h.state(name), "revoke must not touch namespace %q", name)
}

// A user registers a Profile named like an existing team namespace nobody handed over.
func TestProfileNamedLikeAnUnownedNamespaceWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const name = "team-data"
	require.NoError(t, c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "data"}}}))
	require.NoError(t, c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: name}}))
	createProfile(t, c, name, "mallory@example.com")
	refusedProfile(t, h, name, "mallory@example.com", `no "owner" annotation`)
}

// The same with a namespace another user owns, by the profiles controller's annotation.
func TestProfileNamedLikeAnotherUsersNamespaceWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	const name = "team-ml"
	require.NoError(t, h.env.Client.Create(context.Background(), ownedNamespace(name, "olivia@example.com")))
	createProfile(t, h.env.Client, name, "mallory@example.com")
	refusedProfile(t, h, name, "mallory@example.com", `"owner" annotation is "olivia@example.com", not the Profile's spec.owner.name "mallory@example.com"`)
}

// kube-system exists in every cluster, the API server's own.
func TestProfileNamedKubeSystemWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	createProfile(t, h.env.Client, "kube-system", "mallory@example.com")
	refusedProfile(t, h, "kube-system", "mallory@example.com", `reserved (it matches "kube-*"`)
}

// kubeflow is the namespace of principals the policies trust. A Profile registered before the
// platform is installed must not get it created as the user's, and one that "owns" it by every
// rule is refused all the same.
func TestProfileNamedKubeflowWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	createProfile(t, h.env.Client, "kubeflow", "mallory@example.com")
	refusedProfile(t, h, "kubeflow", "mallory@example.com", `reserved (it matches "kubeflow"`)
	assert.False(t, h.exists(&corev1.Namespace{}, "", "kubeflow"), "the reference controller must not create a reserved namespace")
}

// istio-system is the mesh root namespace; here it even carries the owner annotation and the
// Profile as controller, and is still refused.
func TestProfileNamedLikeTheMeshRootNamespaceWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const name = "istio-system"
	createProfile(t, c, name, "mallory@example.com")
	p := h.profile(name)
	n := ownedNamespace(name, "mallory@example.com")
	n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: name, UID: p.UID, Controller: ptrTo(true)}}
	require.NoError(t, c.Create(context.Background(), n))
	refusedProfile(t, h, name, "mallory@example.com", `reserved (it matches "istio-system"`)
}

// The reference controller creates a missing namespace as the profiles controller does, so the
// runner accepts it under the strict rule as well.
func TestCreatedNamespaceIsTheProfilesUnderTheStrictRule(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	cfg := config.Default()
	cfg.Namespaces.Ownership = config.OwnershipReference
	h.useConfig(cfg)
	const name = "grace"
	createProfile(t, h.env.Client, name, "grace@example.com")
	h.reconcile(name)
	assert.Equal(t, "ambient", h.labels(name)["istio.io/dataplane-mode"])
	cond := h.profile(name).Status.Conditions
	require.Len(t, cond, 1)
	assert.NotContains(t, cond[0].Message, "is not written")

	// An annotated namespace an admin made is not enough under that rule.
	const other = "heidi"
	require.NoError(t, h.env.Client.Create(context.Background(), ownedNamespace(other, "heidi@example.com")))
	createProfile(t, h.env.Client, other, "heidi@example.com")
	refusedProfile(t, h, other, "heidi@example.com", "ownerReference requires")
}
