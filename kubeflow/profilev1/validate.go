package profilev1

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate returns what in p no controller can act on although the Profile CRD accepts it, each
// error naming its field path and value. A Profile's namespace has the Profile's name, and a
// Profile, being cluster-scoped, may be named like a DNS-1123 subdomain ("team.a", up to 253
// characters) where a namespace's name must be a DNS-1123 label (Kubernetes
// pkg/apis/core/validation ValidateNamespaceName is apimachinery's ValidateNamespaceName, that
// is IsDNS1123Label). A Profile needs an owner: the profiles controller copies spec.owner.name into
// its namespace's owner annotation, and the admission guard protects only namespaces whose owner
// annotation is not empty (guard/guard.go managed), so a namespace enrolled for an ownerless
// Profile would stand unprotected.
func Validate(p *Profile) field.ErrorList {
	var errs field.ErrorList
	name := field.NewPath("metadata", "name")
	if p.Name == "" {
		errs = append(errs, field.Required(name, "the profile's name is its namespace's name"))
	} else if msgs := validation.IsDNS1123Label(p.Name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(name, p.Name, "the profile's name is its namespace's name, which must be a DNS-1123 label: "+strings.Join(msgs, "; ")))
	}
	if p.Spec.Owner.Name == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "owner", "name"),
			"a profile needs an owner: nothing is enrolled or labelled for a profile without one"))
	}
	return errs
}
