package ownership

import (
	"errors"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// OwnerAnnotation is the namespace annotation in which the Kubeflow profiles controller records
// the Profile's spec.owner.name. It refuses to take over an existing namespace whose annotation
// differs (kubeflow/dashboard components/profile-controller/controllers/profile_controller.go,
// "namespace already exist, but not owned by profile creator").
const OwnerAnnotation = "owner"

// AlwaysReserved lists the namespaces no policy lets a Profile have, the zero Policy
// included: Kubernetes' own (kube-system, kube-public, kube-node-lease, and every kube-* name,
// which Kubernetes reserves) and default.
func AlwaysReserved() []string { return []string{"kube-*", "default"} }

// ErrNamespaceRefused is wrapped by every [NamespaceError].
var ErrNamespaceRefused = errors.New("namespace refused")

// NamespaceError says the runner refused to write into a namespace for a Profile, and which rule
// refused it. It is an [plugin.ErrInput]: reconciling again without a change gives the same answer.
type NamespaceError struct {
	Namespace string
	Profile   string
	// Rule says why, in words an admin can act on.
	Rule string
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("namespace %q is not written for profile %q: %s", e.Namespace, e.Profile, e.Rule)
}

func (e *NamespaceError) Unwrap() []error { return []error{ErrNamespaceRefused, plugin.ErrInput} }

// Policy decides which namespaces the runner writes into for a Profile. A user chooses
// a Profile's name at self-registration, so without it a Profile named kube-system, kubeflow or
// like another team's namespace would get that namespace's policies and labels rewritten.
//
// The zero value is the default rule: a namespace is the Profile's when the Profile is its
// controller (an owner reference with controller: true and the Profile's UID), or, when nothing
// controls it, when its [OwnerAnnotation] equals the Profile's spec.owner.name. The profiles
// controller sets both on the namespaces it creates; the annotation alone is how it accepts a
// namespace an admin made beforehand. A namespace controlled by anything else (another object,
// or an earlier Profile of the same name with another UID) is never the Profile's.
type Policy struct {
	// RequireOwnerReference accepts only a namespace the Profile controls; the owner annotation
	// is then not enough. Anyone who may edit namespace annotations can set that annotation.
	RequireOwnerReference bool
	// Reserved are namespaces never written for any Profile, even one that owns them: names or
	// shell patterns (path.Match) such as "kube-*". [AlwaysReserved] applies in addition.
	Reserved []string
}

// ReservedBy returns the entry of the reserved list (AlwaysReserved first) that name matches.
func (p Policy) ReservedBy(name string) (string, bool) {
	for _, pattern := range append(AlwaysReserved(), p.Reserved...) {
		if ok, _ := path.Match(pattern, name); ok {
			return pattern, true
		}
	}
	return "", false
}

// CheckReserved refuses the Profile's namespace when its name is reserved, or when it cannot be
// a namespace's name at all (see [CheckNamespaceName]). The runner calls it before any read.
func (p Policy) CheckReserved(profile *profilev1.Profile) error {
	if err := CheckNamespaceName(profile); err != nil {
		return err
	}
	if pattern, ok := p.ReservedBy(profile.Name); ok {
		return &NamespaceError{Namespace: profile.Name, Profile: profile.Name,
			Rule: fmt.Sprintf("the namespace is reserved (it matches %q in the reserved namespaces), so no Profile may have it", pattern)}
	}
	return nil
}

// CheckNamespaceName refuses a Profile whose name cannot name a namespace ([profilev1.Validate]'s
// metadata.name). A Profile is cluster-scoped, so the API server accepts any DNS-1123 subdomain as
// its name (dots, up to 253 characters), while a namespace's name must be a DNS-1123 label (no
// dots, at most 63 characters). For a Profile such as "team.a" the namespace can never exist:
// reading it fails or finds nothing on every call, and without this refusal the controller would
// retry with backoff forever and never say why. The refusal is a [NamespaceError], so it is
// terminal and reported.
func CheckNamespaceName(profile *profilev1.Profile) error {
	var msgs []string
	for _, e := range profilev1.Validate(profile) {
		if e.Field == "metadata.name" {
			msgs = append(msgs, e.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return &NamespaceError{Namespace: profile.Name, Profile: profile.Name,
		Rule: fmt.Sprintf("a Profile's namespace has the Profile's name, and %s; "+
			"delete the Profile and create it under a name of at most 63 lowercase letters, digits and '-'",
			strings.Join(msgs, "; "))}
}

// Check returns a [NamespaceError] unless ns is profile's under the policy.
func (p Policy) Check(profile *profilev1.Profile, ns *corev1.Namespace) error {
	if ns.Name != profile.Name {
		return &NamespaceError{Namespace: ns.Name, Profile: profile.Name, Rule: "a Profile's namespace has the Profile's name"}
	}
	if err := p.CheckReserved(profile); err != nil {
		return err
	}
	if err := p.checkOwner(profile, ns); err != nil {
		return err
	}
	return checkGuarded(profile, ns)
}

// checkGuarded refuses a namespace whose [OwnerAnnotation] is there but empty, as the profiles
// controller writes it for a Profile without an owner, also when the Profile controls the
// namespace: the admission guard manages only namespaces whose owner annotation is not empty
// (guard/guard.go managed), and the runner must not enrol a namespace the guard leaves open. A
// namespace without the annotation is still the Profile's by its controller reference (the
// profiles controller writes the annotation on every namespace it makes; only an admin can
// remove it). [Policy.Claimable] does not ask this: it answers who could own the namespace's
// pods, which the annotation does not change.
func checkGuarded(profile *profilev1.Profile, ns *corev1.Namespace) error {
	if owner, annotated := ns.Annotations[OwnerAnnotation]; !annotated || owner != "" {
		return nil
	}
	return &NamespaceError{Namespace: ns.Name, Profile: profile.Name, Rule: fmt.Sprintf(
		"its %q annotation is empty, so the admission guard does not protect it (it manages only namespaces whose annotation names an owner); "+
			"give the Profile an owner (spec.owner.name) and set the annotation to it", OwnerAnnotation)}
}

// checkOwner is Check's rule of who a namespace is for, without the name and reserved checks:
// the one rule [Policy.Claimable] asks too.
func (p Policy) checkOwner(profile *profilev1.Profile, ns *corev1.Namespace) error {
	refuse := func(format string, args ...any) error {
		return &NamespaceError{Namespace: ns.Name, Profile: profile.Name, Rule: fmt.Sprintf(format, args...)}
	}
	if ref := metav1.GetControllerOf(ns); ref != nil {
		if IsProfileRef(*ref) && profile.UID != "" && ref.UID == profile.UID {
			return nil
		}
		return refuse("it is controlled by %s %q (uid %s), not by this Profile (uid %s)", ref.Kind, ref.Name, ref.UID, profile.UID)
	}
	if p.RequireOwnerReference {
		return refuse("it has no controller owner reference to this Profile, which namespaces.ownership: ownerReference requires")
	}
	owner, annotated := ns.Annotations[OwnerAnnotation]
	if !annotated {
		return refuse("it has no controller owner reference to this Profile and no %q annotation; "+
			"an admin may set the annotation to %q to hand it over", OwnerAnnotation, profile.Spec.Owner.Name)
	}
	if owner == "" || owner != profile.Spec.Owner.Name {
		return refuse("its %q annotation is %q, not the Profile's spec.owner.name %q", OwnerAnnotation, owner, profile.Spec.Owner.Name)
	}
	return nil
}

// IsProfileRef reports whether ref points at a Profile, in any version of its group.
func IsProfileRef(ref metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == profilev1.GroupVersion.Group && ref.Kind == profilev1.Kind
}
