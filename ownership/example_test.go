package ownership_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

func ExamplePolicy_Check() {
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "team-ml", UID: "5e0b1c1e"}}
	profile.Spec.Owner.Name = "mallory@example.com"
	// A namespace an admin made for someone else, annotated as the profiles controller does.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-ml",
		Annotations: map[string]string{ownership.OwnerAnnotation: "olivia@example.com"}}}

	fmt.Println(ownership.Policy{}.Check(profile, ns))
	ns.Name, profile.Name = "kubeflow", "kubeflow"
	fmt.Println(ownership.Policy{Reserved: []string{"istio-system", "kubeflow"}}.Check(profile, ns))
	// Output:
	// namespace "team-ml" is not written for profile "team-ml": its "owner" annotation is "olivia@example.com", not the Profile's spec.owner.name "mallory@example.com"
	// namespace "kubeflow" is not written for profile "kubeflow": the namespace is reserved (it matches "kubeflow" in the reserved namespaces), so no Profile may have it
}
