package runner_test

// An object another writer may also create and delete under its name (plugin.Desired.Adopt: kfam's
// contributor policies) is never brought back by a write racing that writer's DELETE: the write
// names the object it read, by UID. The plugin's other objects are brought back: they protect.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// deletedBeforeItsApply is a client over e that deletes the AuthorizationPolicy named name just
// before the runner's first apply of it reaches the API server, as kfam's DELETE would.
func deletedBeforeItsApply(t *testing.T, e *env, name string) (client.Client, *bool) {
	deleted := false
	c := interceptor.NewClient(e.Client.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if appliedName(t, obj) == name && !deleted {
				deleted = true
				require.NoError(t, c.Delete(ctx, &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}))
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	return c, &deleted
}

// appliedName is the metadata.name of an apply configuration.
func appliedName(t *testing.T, obj runtime.ApplyConfiguration) string {
	data, err := json.Marshal(obj)
	require.NoError(t, err)
	var body struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(data, &body))
	return body.Metadata.Name
}

func TestAWriteRacingAnotherWritersDeleteOfAnAdoptableObjectDoesNotBringItBack(t *testing.T) {
	t.Parallel()
	for name, adoptable := range map[string]bool{"adoptable": true, "the plugin's alone": false} {
		t.Run(name, func(t *testing.T) {
			var made []client.Object
			if adoptable {
				// kfam's POST came first; the API server gave it a UID (the fake one gives none).
				made = append(made, &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "contrib", Namespace: ns, UID: "kfam-1"}})
			}
			e := newEnv(t, made...)
			namespaces := []string{"kubeflow"}
			p := &adoptingPlugin{testPlugin: testPlugin{name: "authz", objects: func(plugin.Target) []client.Object {
				return []client.Object{policy("contrib", namespaces...)}
			}}}
			if adoptable {
				p.adopt = []plugin.Ref{policyRef("contrib")}
			}
			require.NoError(t, newRunner(t, e, p).Apply(context.Background(), testProfile()).Err())
			namespaces = []string{"kubeflow", "istio-system"} // a change the next call writes

			c, deleted := deletedBeforeItsApply(t, e, "contrib")
			res := newRunner(t, c, p).Apply(context.Background(), testProfile())
			require.True(t, *deleted, "the write was attempted")
			err := e.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "contrib"}, &istiosecurityv1.AuthorizationPolicy{})
			if !adoptable {
				require.NoError(t, res.Err())
				assert.NoError(t, err, "the plugin's own object is brought back")
				return
			}
			require.NoError(t, res.Err(), "the race is no failure")
			assert.True(t, apierrors.IsNotFound(err), "brought back after another writer deleted it: %v", err)
			assert.True(t, strings.Contains(strings.Join(res.Waiting(), "\n"), "was deleted or replaced since it was read"), "waiting: %q", res.Waiting())
		})
	}
}

// staleBindings is a cache that still shows RoleBindings the API server no longer has.
type staleBindings struct {
	client.Reader
	gone []metav1.PartialObjectMetadata
}

func (s staleBindings) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := s.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*metav1.PartialObjectMetadataList); ok && l.GetObjectKind().GroupVersionKind().Kind == "RoleBindingList" {
		l.Items = append(l.Items, s.gone...)
	}
	return nil
}

// Before it creates an object another writer may create under the same name, the runner reads
// what that decision rests on (the contributor's RoleBinding, which the access plugin only reads)
// past the cache: a cache that still shows the binding kfam has just deleted would have it create
// the contributor's policy, which kfam's next POST for that contributor meets as AlreadyExists.
func TestAContestedCreateRestsOnWhatTheAPIServerHoldsNotOnAStaleCache(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.cfg.Authorization.Contributors = config.ContributorsByPlugin
	m.configure(config.ModeAmbient)
	m.enrol()
	name := authz.ContributorPolicyName("bob@example.com", authz.RoleEdit)
	deleted := metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "rb-1", ResourceVersion: "7",
			CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour)), // past the wait for kfam's POST
			Annotations:       map[string]string{authz.UserAnnotation: "bob@example.com", authz.RoleAnnotation: authz.RoleEdit}},
	}
	m.runner.Reader = staleBindings{Reader: m.c, gone: []metav1.PartialObjectMetadata{deleted}}
	m.runner.APIReader = m.c

	res := m.apply()
	require.NoError(t, res.Err())
	assert.Nil(t, m.policy(name), "created from the cache's stale binding")

	// The read is what decides: without an APIReader the cache is all the runner has.
	m.runner.APIReader = nil
	require.NoError(t, m.apply().Err())
	assert.NotNil(t, m.policy(name), "the stale binding shows through the cache alone")
}
