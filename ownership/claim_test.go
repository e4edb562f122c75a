package ownership_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

func TestClaimable(t *testing.T) {
	strict := ownership.Policy{RequireOwnerReference: true}
	profileRef := fixture.ControllerRef("kubeflow.org/v1", "Profile", ns, "1111-2222")
	cases := []struct {
		name   string
		policy ownership.Policy
		ns     *corev1.Namespace
		// wantWhy is "" when no Profile could have the namespace.
		wantWhy string
	}{
		{"controlled by a Profile", ownership.Policy{}, fixture.Namespace(ns, "-", profileRef), "Profile alice controls it"},
		{"controlled by a Profile of v1beta1", strict, fixture.Namespace(ns, "-", fixture.ControllerRef("kubeflow.org/v1beta1", "Profile", ns, "u")),
			"Profile alice controls it"},
		{"controlled by a Profile, when ownerReference is required", strict, fixture.Namespace(ns, "-", profileRef), "Profile alice controls it"},
		{"owner annotation only", ownership.Policy{}, fixture.Namespace(ns, "alice@example.com"),
			`its "owner" annotation is "alice@example.com", so a Profile of that owner may have it`},
		{"owner annotation, when ownerReference is required", strict, fixture.Namespace(ns, "alice@example.com"), ""},
		{"empty owner annotation", ownership.Policy{}, fixture.Namespace(ns, ""), ""},
		{"nothing", ownership.Policy{}, fixture.Namespace(ns, "-"), ""},
		{"controlled by something else, with an owner annotation", ownership.Policy{},
			fixture.Namespace(ns, "alice@example.com", fixture.ControllerRef("apps/v1", "Deployment", "x", "u")), ""},
		{"a Profile as a reference that is not the controller", ownership.Policy{},
			fixture.Namespace(ns, "-", metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: ns, UID: "u"}), ""},
		{"does not exist", ownership.Policy{}, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			why, ok := tc.policy.Claimable(tc.ns)
			assert.Equal(t, tc.wantWhy != "", ok)
			assert.Equal(t, tc.wantWhy, why)
		})
	}
}

// Reserving a namespace does not take it from its user: Claimable answers for the rule of who a
// namespace is for, which Check applies after the reserved names.
func TestClaimableIgnoresReservedNames(t *testing.T) {
	p := ownership.Policy{Reserved: []string{"kubeflow"}}
	for _, name := range []string{"kubeflow", "kube-system", "default"} {
		n := fixture.Namespace(name, "mallory@example.com")
		why, ok := p.Claimable(n)
		assert.True(t, ok, name)
		assert.Contains(t, why, "mallory@example.com", name)
	}
}

// Claimable and Check are one rule: a namespace some Profile passes Check for (reserved names
// aside) is claimable, and the Profile Claimable stands for passes.
func TestClaimableAgreesWithCheck(t *testing.T) {
	owned := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns, UID: "1111-2222"},
		Spec: profilev1.ProfileSpec{Owner: fixture.User("alice@example.com")}}
	for _, policy := range []ownership.Policy{{}, {RequireOwnerReference: true}} {
		for _, n := range []*corev1.Namespace{
			fixture.Namespace(ns, "alice@example.com"),
			fixture.Namespace(ns, "bob@example.com"),
			fixture.Namespace(ns, "-", fixture.ControllerRef("kubeflow.org/v1", "Profile", ns, "1111-2222")),
			fixture.Namespace(ns, "alice@example.com", fixture.ControllerRef("kubeflow.org/v1", "Profile", ns, "old-uid")),
			fixture.Namespace(ns, "alice@example.com", fixture.ControllerRef("apps/v1", "Deployment", "x", "1111-2222")),
		} {
			_, ok := policy.Claimable(n)
			if policy.Check(owned, n) == nil {
				assert.True(t, ok, "Check accepts Profile alice for %+v under %+v, and Claimable says no Profile could have it", n.ObjectMeta, policy)
			}
			if !ok {
				continue
			}
			claimant := owned.DeepCopy()
			if ref := metav1.GetControllerOf(n); ref != nil {
				claimant.UID = ref.UID
			} else {
				claimant.Spec.Owner.Name = n.Annotations[ownership.OwnerAnnotation]
			}
			assert.NoError(t, policy.Check(claimant, n), "Claimable says a Profile could have %+v", n.ObjectMeta)
		}
	}
}

// The kubeflow namespace, where the platform callers run, annotated as the profiles controller
// annotates a user's: reserving it keeps the runner out, but a Profile of that owner could still
// have it, which is what the platform check reports.
func ExamplePolicy_Claimable() {
	kubeflow := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeflow",
		Annotations: map[string]string{ownership.OwnerAnnotation: "mallory@example.com"}}}
	policy := ownership.Policy{Reserved: []string{"kubeflow"}}
	why, ok := policy.Claimable(kubeflow)
	fmt.Printf("%t: %s\n", ok, why)
	policy.RequireOwnerReference = true // namespaces.ownership: ownerReference
	_, ok = policy.Claimable(kubeflow)
	fmt.Println(ok)
	// Output:
	// true: its "owner" annotation is "mallory@example.com", so a Profile of that owner may have it
	// false
}
