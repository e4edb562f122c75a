package ownership_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

const ns = "alice"

func testProfile() *profilev1.Profile {
	return &profilev1.Profile{
		ObjectMeta: metav1.ObjectMeta{Name: ns, UID: "1111-2222"},
		Spec:       profilev1.ProfileSpec{Owner: fixture.User("alice@example.com")},
	}
}

func TestNamespacePolicyCheck(t *testing.T) {
	profile := testProfile() // alice, uid 1111-2222, owner alice@example.com
	ours := fixture.ControllerRef("kubeflow.org/v1", "Profile", ns, profile.UID)
	cases := []struct {
		name   string
		policy ownership.Policy
		ns     *corev1.Namespace
		// wantRule is "" when the namespace is the Profile's, else a part of the refusal's rule.
		wantRule string
	}{
		{"controller reference and annotation", ownership.Policy{}, fixture.Namespace(ns, "alice@example.com", ours), ""},
		{"controller reference only", ownership.Policy{}, fixture.Namespace(ns, "-", ours), ""},
		{"controller reference of v1beta1", ownership.Policy{}, fixture.Namespace(ns, "-", fixture.ControllerRef("kubeflow.org/v1beta1", "Profile", ns, profile.UID)), ""},
		{"annotation only", ownership.Policy{}, fixture.Namespace(ns, "alice@example.com"), ""},
		{"nothing", ownership.Policy{}, fixture.Namespace(ns, "-"), `no "owner" annotation`},
		{"another owner", ownership.Policy{}, fixture.Namespace(ns, "bob@example.com"), `"owner" annotation is "bob@example.com", not the Profile's spec.owner.name "alice@example.com"`},
		{"empty annotation", ownership.Policy{}, fixture.Namespace(ns, ""), `"owner" annotation is ""`},
		{"annotation differs in case", ownership.Policy{}, fixture.Namespace(ns, "Alice@example.com"), `not the Profile's spec.owner.name`},
		{"an earlier Profile of the same name", ownership.Policy{}, fixture.Namespace(ns, "alice@example.com", fixture.ControllerRef("kubeflow.org/v1", "Profile", ns, "old-uid")),
			`controlled by Profile "alice" (uid old-uid), not by this Profile (uid 1111-2222)`},
		{"controlled by another kind with our UID", ownership.Policy{}, fixture.Namespace(ns, "alice@example.com", fixture.ControllerRef("example.com/v1", "Profile", ns, profile.UID)),
			`controlled by Profile "alice"`},
		{"controlled by something else", ownership.Policy{}, fixture.Namespace(ns, "alice@example.com", fixture.ControllerRef("apps/v1", "Deployment", "x", "u")),
			`controlled by Deployment "x"`},
		{"a non-controller reference is not ownership", ownership.Policy{RequireOwnerReference: true},
			fixture.Namespace(ns, "alice@example.com", metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: ns, UID: profile.UID}),
			"which namespaces.ownership: ownerReference requires"},
		{"strict: controller reference", ownership.Policy{RequireOwnerReference: true}, fixture.Namespace(ns, "-", ours), ""},
		{"strict: annotation is not enough", ownership.Policy{RequireOwnerReference: true}, fixture.Namespace(ns, "alice@example.com"),
			"no controller owner reference to this Profile, which namespaces.ownership: ownerReference requires"},
		{"reserved even when owned", ownership.Policy{Reserved: []string{"ali*"}}, fixture.Namespace(ns, "alice@example.com", ours),
			`reserved (it matches "ali*"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Check(profile, tc.ns)
			if tc.wantRule == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ownership.ErrNamespaceRefused)
			assert.ErrorIs(t, err, plugin.ErrInput, "a refusal is not retried")
			assert.Contains(t, err.Error(), `namespace "alice" is not written for profile "alice"`)
			assert.Contains(t, err.Error(), tc.wantRule)
		})
	}
}

func TestNamespacePolicyCheckRefusesAnotherNamespace(t *testing.T) {
	other := fixture.Namespace(ns, "alice@example.com", fixture.ControllerRef("kubeflow.org/v1", "Profile", ns, "1111-2222"))
	other.Name = "bob"
	assert.ErrorContains(t, ownership.Policy{}.Check(testProfile(), other), "has the Profile's name")
}

func TestReservedBy(t *testing.T) {
	var zero ownership.Policy
	for _, name := range []string{"kube-system", "kube-public", "kube-node-lease", "kube-anything", "default"} {
		pattern, ok := zero.ReservedBy(name)
		assert.True(t, ok, "%s is reserved by every policy, the zero one included", name)
		assert.NotEmpty(t, pattern)
	}
	for _, name := range []string{"kube", "kubeflow", "defaults", "alice", "istio-system"} {
		_, ok := zero.ReservedBy(name)
		assert.False(t, ok, "%s is not reserved by the zero policy", name)
	}
	p := ownership.Policy{Reserved: []string{"istio-system", "kubeflow", "team-?"}}
	for name, want := range map[string]string{"istio-system": "istio-system", "kubeflow": "kubeflow", "team-a": "team-?", "kube-system": "kube-*"} {
		got, ok := p.ReservedBy(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, got, name)
	}
	_, ok := p.ReservedBy("team-ab")
	assert.False(t, ok)
}

// A Profile is cluster-scoped, so its name may hold dots and run to 253 characters; a namespace's
// may not. Such a Profile's namespace can never exist, and every policy, the zero one included,
// refuses it before any read, as a NamespaceError naming the rule: an input error, so the
// controller reports it once instead of retrying forever.
func TestCheckReservedRefusesAProfileNameThatCannotNameANamespace(t *testing.T) {
	long := strings.Repeat("a", 64)
	for name, want := range map[string]string{
		"team.a": "must not contain dots",
		long:     "must be no more than 63 characters",
		"a.b.c":  "must not contain dots",
	} {
		p := testProfile()
		p.Name = name
		for _, policy := range []ownership.Policy{{}, {RequireOwnerReference: true, Reserved: []string{"kubeflow"}}} {
			err := policy.CheckReserved(p)
			require.Error(t, err, name)
			var nsErr *ownership.NamespaceError
			require.ErrorAs(t, err, &nsErr, name)
			assert.Equal(t, name, nsErr.Namespace)
			assert.ErrorIs(t, err, ownership.ErrNamespaceRefused)
			assert.ErrorIs(t, err, plugin.ErrInput, "a name that cannot be a namespace is not retried")
			assert.Contains(t, err.Error(), `metadata.name: Invalid value: "`+name+`"`, name)
			assert.Contains(t, err.Error(), want, name)
			assert.Equal(t, err.Error(), ownership.CheckNamespaceName(p).Error(), "CheckReserved refuses it through CheckNamespaceName")
		}
	}
	for _, name := range []string{"team-a", strings.Repeat("a", 63), "a", "0team"} {
		p := testProfile()
		p.Name = name
		assert.NoError(t, ownership.Policy{}.CheckReserved(p), "%q is a namespace name", name)
		assert.NoError(t, ownership.CheckNamespaceName(p), "%q is a namespace name", name)
	}
}
