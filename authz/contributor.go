package authz

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
)

// Contributor roles kfam grants.
const (
	RoleEdit = "edit"
	RoleView = "view"
)

var notAlphanumeric = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// ContributorPolicyName is the name kfam gives a contributor's RoleBinding and policy:
// "user-<user>-clusterrole-<role>", lower case, every run of other characters turned into "-".
// Following it lets the plugin recognise (and, when configured, adopt) what kfam already made.
// A name longer than a Kubernetes object name may be (253) is cut and ends in a hash of the
// whole name, so it stays unique and stable.
func ContributorPolicyName(user, role string) string {
	raw := strings.ToLower(strings.Join([]string{"User", notAlphanumeric.ReplaceAllString(user, "-"), "ClusterRole", role}, "-"))
	name := notAlphanumeric.ReplaceAllString(raw, "-")
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:5])
	return strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength-len(suffix)], "-") + suffix
}

// ContributorPolicy is the policy that lets user work in namespace with role: the ingress and the
// Pipelines UI may call in when the user-id header names the contributor. In ambient mode it is
// attached to the waypoint, as the owner's is. kfam can call this instead of building its own.
func ContributorPolicy(cfg *config.Config, namespace, user, role string) (*istiosecurityv1.AuthorizationPolicy, error) {
	var errs field.ErrorList
	errs = append(errs, ValidateIdentity(field.NewPath("contributor", "user"), user)...)
	if role != RoleEdit && role != RoleView {
		errs = append(errs, field.NotSupported(field.NewPath("contributor", "role"), role, []string{RoleEdit, RoleView}))
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	pol := newPolicy(ContributorPolicyName(user, role), namespace, map[string]string{UserAnnotation: user, RoleAnnotation: role})
	pol.Spec.Rules = append(pol.Spec.Rules, onBehalfOfUser(cfg, user))
	if cfg.Mesh.Mode == config.ModeAmbient {
		pol.Spec.TargetRefs = []*typev1beta1.PolicyTargetReference{GatewayTarget(cfg.Mesh.Waypoint.Name)}
	}
	return pol, nil
}

// Contributor is one user kfam has given a role in a namespace.
type Contributor struct{ User, Role string }

// ContributorsFrom finds the contributors in kfam's RoleBindings: those annotated with user and
// an edit or view role, and named by kfam's convention (so a hand-made binding with borrowed
// annotations is not mistaken for one). The owner's binding (role admin) is not a contributor.
func ContributorsFrom(bindings []*rbacv1.RoleBinding) []Contributor {
	var out []Contributor
	for _, b := range bindings {
		user, role := b.Annotations[UserAnnotation], b.Annotations[RoleAnnotation]
		if user == "" || (role != RoleEdit && role != RoleView) || b.Name != ContributorPolicyName(user, role) {
			continue
		}
		out = append(out, Contributor{User: user, Role: role})
	}
	return out
}
