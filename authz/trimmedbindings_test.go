package authz_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// bindingMetadata is a RoleBinding named name with annotations, as the metadata cache lists it.
func bindingMetadata(name string, annotations map[string]string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations}}
	m.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
	return m
}

// The cache keeps of a contributor's binding only bounded annotations
// (authz.TrimRoleBindingMetadata, authz.KeptContributorAnnotations), and the plugin decides on
// what it keeps as on the whole binding: the same policies, byte for byte the same errors, and
// the same bindings ignored, whose warnings then quote the user cut.
func TestTheTrimmedCacheGivesThePluginTheSameContributors(t *testing.T) {
	cfg := fixture.Config(t, "authorization: {contributors: plugin}\n")
	// A user far past config.MaxIdentityLength whose kfam name is short: kfam's name folds the
	// dots into one dash.
	dotted := "a" + strings.Repeat(".", 300<<10) + "b@example.com"
	long := strings.Repeat("x", 300<<10)
	cutValue := long[:config.MaxIdentityLength-len(", cut by the cache")-1] + ", cut by the cache"
	for _, tc := range []struct {
		name        string
		binding     *metav1.PartialObjectMetadata
		ignoredOnly bool // the binding is ignored: its warning quotes the user, which is cut
	}{
		{"a contributor", bindingMetadata(authz.ContributorPolicyName("carol@example.com", "edit"),
			map[string]string{"user": "carol@example.com", "role": "edit", "padding": long}), false},
		{"a user of the longest valid length", bindingMetadata(authz.ContributorPolicyName(strings.Repeat("c", 244)+"@example.com", "view"),
			map[string]string{"user": strings.Repeat("c", 244) + "@example.com", "role": "view"}), false},
		{"a too long user under kfam's name", bindingMetadata(authz.ContributorPolicyName(dotted, "edit"),
			map[string]string{"user": dotted, "role": "edit"}), false},
		{"a too long user whose kfam name is too long for a binding too", bindingMetadata(authz.ContributorPolicyName(long[:1000], "view"),
			map[string]string{"user": long[:1000], "role": "view"}), false},
		{"a too long user under another name", bindingMetadata("mallory",
			map[string]string{"user": long, "role": "edit"}), true},
		{"a too long user under the name of its cut value", bindingMetadata(authz.ContributorPolicyName(cutValue, "edit"),
			map[string]string{"user": long, "role": "edit"}), true},
		{"a too long multi-byte user under another name", bindingMetadata("mallory",
			map[string]string{"user": strings.Repeat("é", 300), "role": "edit"}), true},
		{"a too long role", bindingMetadata(authz.ContributorPolicyName("carol@example.com", "edit"),
			map[string]string{"user": "carol@example.com", "role": "edit" + long}), false},
		{"the owner's binding", bindingMetadata("namespaceAdmin", map[string]string{"user": long, "role": "admin"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := authz.TrimRoleBindingMetadata(tc.binding.DeepCopy())
			require.NoError(t, err)
			trimmed := out.(*metav1.PartialObjectMetadata)
			for k, v := range trimmed.Annotations {
				assert.LessOrEqual(t, len(v), max(config.MaxIdentityLength+1, len(tc.binding.Name)), "annotation %s is kept bounded", k)
			}
			generate := func(b client.Object) plugin.Desired {
				d, err := authz.New(cfg).Generate(plugin.Target{Namespace: ns, Owner: owner, Observed: plugin.Observed{Objects: []client.Object{b}}})
				require.NoError(t, err)
				return d
			}
			whole, kept := generate(tc.binding), generate(trimmed)
			if strings.HasPrefix(tc.name, "a too long user whose") || strings.HasPrefix(tc.name, "a too long user under kfam") {
				require.Len(t, whole.Errors, 1)
				assert.Contains(t, whole.Errors[0].Error(), "contributor.user: Too long", "the whole binding's error")
			}
			assert.Equal(t, whole.Objects, kept.Objects, "the same policies")
			assert.Equal(t, errorStrings(whole.Errors), errorStrings(kept.Errors), "byte for byte the same errors")
			assert.Equal(t, whole.Waiting, kept.Waiting)
			if !tc.ignoredOnly {
				assert.Equal(t, whole.Warnings, kept.Warnings)
				return
			}
			wholeC, wholeIgnored := authz.ContributorsFrom([]metav1.Object{tc.binding})
			keptC, keptIgnored := authz.ContributorsFrom([]metav1.Object{trimmed})
			assert.Empty(t, wholeC)
			assert.Empty(t, keptC, "a binding ignored whole is ignored trimmed")
			require.Len(t, wholeIgnored, 1)
			require.Len(t, keptIgnored, 1)
			assert.Contains(t, keptIgnored[0], "cut by the cache", "the warning says the user was cut")
			assert.Less(t, len(keptIgnored[0]), 2<<10)
			assert.Len(t, kept.Warnings, len(whole.Warnings))
		})
	}
}

// Applied again to what it kept, KeptContributorAnnotations keeps the same: an informer may
// transform an object it transformed.
func TestKeptContributorAnnotationsAreKeptAgainUnchanged(t *testing.T) {
	long := strings.Repeat("Ab.", 200)
	for _, b := range []struct {
		name        string
		annotations map[string]string
	}{
		{authz.ContributorPolicyName(long, "edit"), map[string]string{"user": long, "role": "edit"}},
		{authz.ContributorPolicyName("x"+long, "edit"), map[string]string{"user": "x" + long + strings.Repeat("y", 400), "role": "edit"}},
		{"other", map[string]string{"user": long, "role": "view" + long}},
		{"other", map[string]string{"user": "carol@example.com"}},
		{"other", map[string]string{"padding": long}},
	} {
		once := authz.KeptContributorAnnotations(b.name, b.annotations)
		assert.Equal(t, once, authz.KeptContributorAnnotations(b.name, once), b.name)
	}
	assert.Nil(t, authz.KeptContributorAnnotations("x", map[string]string{"padding": long}), "no kfam annotation, nothing kept")
}

func errorStrings(errs []error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}
