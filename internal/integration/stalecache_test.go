package integration

// A cache lags the API server: the controller's informers see kfam's two requests (a RoleBinding,
// then its policy) in either order, and late. Whatever the cache still shows, the runner must not
// bring back an object kfam has just deleted: kfam's next POST for the same contributor would
// meet it as AlreadyExists and answer the dashboard with an error (issue #22).

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// laggingReader is a cache that has not seen some deletions yet: besides what the API server
// holds, it shows the ghosts, objects as they were before they were deleted.
type laggingReader struct {
	client.Reader
	ghosts []client.Object
}

func (l laggingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	for _, g := range l.ghosts {
		if client.ObjectKeyFromObject(g) == key && sameKind(g, obj) {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(g.DeepCopyObject()).Elem())
			return nil
		}
	}
	return l.Reader.Get(ctx, key, obj, opts...)
}

func (l laggingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := l.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return err
	}
	for _, g := range l.ghosts {
		item, err := itemOf(list)
		if err != nil || !sameKind(g, item) || client.ObjectKeyFromObject(g).Namespace != namespaceOf(opts) {
			continue
		}
		items = append(items, g.DeepCopyObject())
	}
	return apimeta.SetList(list, items)
}

// sameKind says whether a and b are objects of one kind (of one Go type, and for metadata of the
// same kind).
func sameKind(a, b client.Object) bool {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	_, metadata := a.(*metav1.PartialObjectMetadata)
	return !metadata || a.GetObjectKind().GroupVersionKind().Kind == b.GetObjectKind().GroupVersionKind().Kind
}

// itemOf is an empty item of list's kind.
func itemOf(list client.ObjectList) (client.Object, error) {
	if l, ok := list.(*metav1.PartialObjectMetadataList); ok {
		item := &metav1.PartialObjectMetadata{}
		item.SetGroupVersionKind(l.GroupVersionKind().GroupVersion().WithKind(trimList(l.GroupVersionKind().Kind)))
		return item, nil
	}
	items, err := apimeta.ExtractList(list.DeepCopyObject())
	if err == nil && len(items) > 0 {
		return items[0].(client.Object), nil
	}
	v := reflect.ValueOf(list).Elem().FieldByName("Items")
	if !v.IsValid() {
		return nil, err
	}
	elem := v.Type().Elem()
	if elem.Kind() == reflect.Pointer {
		return reflect.New(elem.Elem()).Interface().(client.Object), nil
	}
	return reflect.New(elem).Interface().(client.Object), nil
}

func trimList(kind string) string { return kind[:len(kind)-len("List")] }

func namespaceOf(opts []client.ListOption) string {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	return o.Namespace
}

// kfamRace sets up a Profile's namespace with one contributor added through kfam's two requests
// and taken over by the runner, and returns the runner and the contributor's names.
func kfamRace(t *testing.T, c client.Client, name string) (*runner.Runner, *profilev1.Profile, string) {
	t.Helper()
	ctx := context.Background()
	p := profileIn(t, c, name)
	cfg := config.Default()
	cfg.Authorization.Contributors = config.ContributorsByPlugin
	cfg.Authorization.KfamGracePeriod = &metav1.Duration{Duration: time.Second}
	cfg.Mesh.Mode = config.ModeSidecar // no waypoint to wait for: the policies are the point
	require.NoError(t, cfg.Validate())
	r, err := profileplugins.NewRunner(c, cfg)
	require.NoError(t, err)
	r.APIReader = c
	converged(t, r, p)

	const user = "bob@example.com"
	policy := authz.ContributorPolicyName(user, authz.RoleEdit)
	require.NoError(t, kfamAdd(ctx, c, name, user))
	time.Sleep(1100 * time.Millisecond) // the binding is older than the grace period now
	converged(t, r, p)
	pol := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: name, Name: policy}, pol))
	require.Equal(t, "profile-plugins", pol.Labels["app.kubernetes.io/managed-by"], "the runner took kfam's policy over")
	return r, p, user
}

// kfamAdd sends kfam's add: the RoleBinding, then the policy (kubeflow/dashboard
// components/access-management/kfam/bindings.go, BindingClient.Create).
func kfamAdd(ctx context.Context, c client.Client, ns, user string) error {
	name := authz.ContributorPolicyName(user, authz.RoleEdit)
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{authz.UserAnnotation: user, authz.RoleAnnotation: authz.RoleEdit}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeflow-edit"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := c.Create(ctx, rb, client.FieldOwner("kfam")); err != nil {
		return err
	}
	pol := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Annotations: map[string]string{authz.UserAnnotation: user, authz.RoleAnnotation: authz.RoleEdit}}}
	pol.Spec.Rules = []*securityv1beta1.Rule{{When: []*securityv1beta1.Condition{{Key: "request.headers[kubeflow-userid]", Values: []string{user}}}}}
	return c.Create(ctx, pol, client.FieldOwner("kfam"))
}

// kfamRemove sends kfam's remove: the RoleBinding deleted, then the policy.
func kfamRemove(ctx context.Context, c client.Client, ns, user string) error {
	name := authz.ContributorPolicyName(user, authz.RoleEdit)
	if err := c.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
		return err
	}
	return c.Delete(ctx, &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
}

// replayWithGhost sends kfam's removal of the race's contributor, lets the runner reconcile once
// through a cache that still shows ghost, and checks that the policy kfam deleted stays deleted
// and that kfam's re-add right after the removal succeeds. It returns the reconcile's Result.
func replayWithGhost(t *testing.T, c client.Client, r *runner.Runner, p *profilev1.Profile, user string, ghost client.Object) *runner.Result {
	t.Helper()
	ctx := context.Background()
	policy := authz.ContributorPolicyName(user, authz.RoleEdit)
	require.NoError(t, kfamRemove(ctx, c, p.Name, user))
	r.Reader = laggingReader{Reader: c, ghosts: []client.Object{ghost}}
	res := r.Apply(ctx, p)
	require.NoError(t, res.Err())
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: p.Name, Name: policy}, &istiosecurityv1.AuthorizationPolicy{})),
		"the policy kfam deleted stays deleted: %s", res)
	require.NoError(t, kfamAdd(ctx, c, p.Name, user), "kfam's re-add right after the removal")
	return res
}

// The cache still shows the RoleBinding kfam deleted, but already not its policy (two informers,
// two orders): the access plugin would create the policy again. Before creating an object another
// writer may create under the same name, the runner lists what the decision came from on the API
// server, finds the binding gone, and creates nothing.
func TestALaggingCachesDeletedRoleBindingCreatesNoPolicyKfamIsAboutToPostOnTheAPIServer(t *testing.T) {
	t.Parallel()
	c := envtest.Start(t).Client
	r, p, user := kfamRace(t, c, "stale-binding")
	binding := &metav1.PartialObjectMetadata{}
	binding.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: p.Name, Name: authz.ContributorPolicyName(user, authz.RoleEdit)}, binding))

	res := replayWithGhost(t, c, r, p, user, binding)
	assert.Empty(t, res.Plugins[pluginIndex(t, res, authz.PluginName)].Created, "created from a ghost binding")
}

// The cache still shows the policy kfam is deleting, but already not its RoleBinding: the access
// plugin empties the policy (its binding went), and that write reaches the API server after kfam's
// DELETE. Server-side apply creates a missing object; with the UID of the version read in the
// body the API server refuses instead, and the policy stays deleted.
func TestAnUpdateFromALaggingCacheDoesNotBringBackAPolicyKfamDeletedOnTheAPIServer(t *testing.T) {
	t.Parallel()
	c := envtest.Start(t).Client
	r, p, user := kfamRace(t, c, "stale-policy")
	ghost := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: p.Name, Name: authz.ContributorPolicyName(user, authz.RoleEdit)}, ghost))
	ghost.SetGroupVersionKind(istiosecurityv1.SchemeGroupVersion.WithKind("AuthorizationPolicy"))

	replayWithGhost(t, c, r, p, user, ghost)
	r.Reader = c
	converged(t, r, p)
}

func pluginIndex(t *testing.T, res *runner.Result, name string) int {
	t.Helper()
	for i, pr := range res.Plugins {
		if pr.Plugin == name {
			return i
		}
	}
	t.Fatalf("no result for plugin %s", name)
	return -1
}
