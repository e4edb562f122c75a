package ownership

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// Claimable says whether some Profile could have ns under the policy's rule of who a namespace is
// for, whatever the policy reserves, and why, in words an admin can act on. The platform check
// asks it of every namespace the access policies trust: reserving such a namespace only makes the
// runner refuse its Profile, while the Profile's owner keeps the namespace and can run pods there.
//
// It asks [Policy.Check]'s own rule rather than restating it: only two Profiles could pass that
// rule, the one whose UID the namespace's controller reference names and, when nothing controls the
// namespace, one whose spec.owner.name is the namespace's [OwnerAnnotation].
func (p Policy) Claimable(ns *corev1.Namespace) (string, bool) {
	if ns == nil {
		return "", false
	}
	candidate := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}
	ref := metav1.GetControllerOf(ns)
	if ref != nil {
		candidate.UID = ref.UID
	} else {
		candidate.Spec.Owner = rbacv1.Subject{Kind: rbacv1.UserKind, Name: ns.Annotations[OwnerAnnotation]}
	}
	if p.checkOwner(candidate, ns) != nil {
		return "", false
	}
	if ref != nil {
		return fmt.Sprintf("Profile %s controls it", ref.Name), true
	}
	return fmt.Sprintf("its %q annotation is %q, so a Profile of that owner may have it", OwnerAnnotation, candidate.Spec.Owner.Name), true
}
