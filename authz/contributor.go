package authz

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// Contributor roles kfam grants.
const (
	RoleEdit = "edit"
	RoleView = "view"
)

// kfamRoleRefKind is the roleRef kind of every binding kfam makes for the dashboard.
const kfamRoleRefKind = "ClusterRole"

var notAlphanumeric = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// ContributorPolicyName is the name kfam gives a contributor's RoleBinding and policy, byte for
// byte as getBindingName in kubeflow/dashboard components/access-management/kfam/bindings.go
// makes it: the subject kind "User", the user with every run of characters other than ASCII
// letters and digits turned into "-" (and then query-escaped, which leaves such a string as it
// is), the roleRef kind "ClusterRole" and the role, joined with "-", lower-cased, and every such
// run turned into "-" again. So "A.B@X.COM" and "a-b@x.com" get the same name.
//
// The name is not shortened, as kfam does not shorten it: a name longer than an
// AuthorizationPolicy's may be (253) is one kfam cannot create the policy under, and
// [ContributorPolicy] refuses it rather than make up another.
func ContributorPolicyName(user, role string) string {
	raw := strings.ToLower(strings.Join([]string{
		rbacv1.UserKind, url.QueryEscape(notAlphanumeric.ReplaceAllString(user, "-")), kfamRoleRefKind, role,
	}, "-"))
	return notAlphanumeric.ReplaceAllString(raw, "-")
}

// ContributorPolicy is the policy that lets user work in namespace with role: the ingress and the
// Pipelines UI may call in when the user-id header names the contributor. In ambient mode it is
// attached to the waypoint, as the owner's is. kfam can call this instead of building its own.
//
// It is refused, with an error naming contributor.user and quoting the user, when the user is not
// an identity a policy can match safely (see config.ValidateIdentity) or when kfam's name for it
// is not a valid object name.
func ContributorPolicy(cfg *config.Config, namespace, user, role string) (*istiosecurityv1.AuthorizationPolicy, error) {
	return newBuilder(cfg).contributorPolicy(namespace, user, role)
}

// Where a contributor's errors point; a field.Path is never changed once made.
var (
	contributorUserPath = field.NewPath("contributor", "user")
	contributorRolePath = field.NewPath("contributor", "role")
)

func (b *builder) contributorPolicy(namespace, user, role string) (*istiosecurityv1.AuthorizationPolicy, error) {
	errs := validateUser(b.cfg, contributorUserPath, user)
	if role != RoleEdit && role != RoleView {
		errs = append(errs, field.NotSupported(contributorRolePath, role, []string{RoleEdit, RoleView}))
	}
	name := ContributorPolicyName(user, role)
	if len(errs) == 0 {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(contributorUserPath, user, fmt.Sprintf(
				"kfam names this contributor's RoleBinding and policy %q, which is not a valid AuthorizationPolicy name (%s), so kfam cannot create the policy; no other name is made up for it",
				name, strings.Join(msgs, "; "))))
		}
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	p := newPolicy(name, namespace, map[string]string{UserAnnotation: user, RoleAnnotation: role})
	rules := newRules(b.userRule)
	b.onBehalfOfUser(&rules, user)
	p.policy.Spec.Rules = rules.rules
	if b.cfg.Mesh.Mode == config.ModeAmbient {
		p.targetGateway(b.cfg.Mesh.Waypoint.Name)
	}
	return &p.policy, nil
}

// Contributor is one user kfam has given a role in a namespace.
type Contributor struct{ User, Role string }

// PolicyName is kfam's name for the contributor's RoleBinding and policy.
func (c Contributor) PolicyName() string { return ContributorPolicyName(c.User, c.Role) }

// ContributorsFrom finds the contributors in kfam's RoleBindings. It reads only names and
// annotations, so bindings may come from a metadata-only cache. A binding is a contributor's when
// it is annotated with user and an edit or view role and is named as kfam names it, so a
// hand-made binding with borrowed annotations is not mistaken for one; the owner's binding (role
// admin) is not a contributor. Ignored says, for each binding that carries kfam's annotations
// but not kfam's name, why it gets no policy: the dashboard, which lists bindings by their
// annotations, shows it as a contributor nonetheless.
func ContributorsFrom(bindings []metav1.Object) (contributors []Contributor, ignored []string) {
	for _, b := range bindings {
		user, role := b.GetAnnotations()[UserAnnotation], b.GetAnnotations()[RoleAnnotation]
		if user == "" || (role != RoleEdit && role != RoleView) {
			continue
		}
		c := Contributor{User: user, Role: role}
		if want := c.PolicyName(); b.GetName() != want {
			ignored = append(ignored, fmt.Sprintf("RoleBinding %s has kfam's annotations (user %q, role %q) but not kfam's name %q, so it grants no network access; kfam made none like it",
				b.GetName(), user, role, want))
			continue
		}
		contributors = append(contributors, c)
	}
	return contributors, ignored
}

// ContributorPolicies makes the policies of a namespace's contributors, sorted by name. A
// contributor that cannot have one gets an error naming the RoleBinding instead: a user refused by
// [ContributorPolicy], or users that kfam folds to one name (a.b@x.com, a-b@x.com and A.B@X.COM
// with the same role all become user-a-b-x-com-clusterrole-<role>). One policy under that name
// can match only one of them, and choosing would be a guess, so neither is granted until all but
// one of them are removed. Within one namespace Kubernetes' unique names already prevent it (kfam's
// second RoleBinding is refused as AlreadyExists); lists assembled elsewhere can still collide.
func ContributorPolicies(cfg *config.Config, namespace string, contributors []Contributor) ([]*istiosecurityv1.AuthorizationPolicy, []error) {
	return newBuilder(cfg).contributorPolicies(namespace, contributors)
}

func (b *builder) contributorPolicies(namespace string, contributors []Contributor) ([]*istiosecurityv1.AuthorizationPolicy, []error) {
	byName := map[string][]Contributor{}
	for _, c := range contributors {
		name := c.PolicyName()
		if !slices.Contains(byName[name], c) {
			byName[name] = append(byName[name], c)
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	var (
		pols []*istiosecurityv1.AuthorizationPolicy
		errs []error
	)
	for _, name := range names {
		same := byName[name]
		if len(same) > 1 {
			errs = append(errs, foldConflict(name, same))
			continue
		}
		pol, err := b.contributorPolicy(namespace, same[0].User, same[0].Role)
		if err != nil {
			errs = append(errs, fmt.Errorf("RoleBinding %s: no contributor policy: %w", name, err))
			continue
		}
		pols = append(pols, pol)
	}
	return pols, errs
}

func foldConflict(name string, same []Contributor) error {
	users := make([]string, len(same))
	for i, c := range same {
		users[i] = fmt.Sprintf("%q", c.User)
	}
	sort.Strings(users)
	return fmt.Errorf("RoleBinding %s: contributor.user: users %s all get kfam's name %q (kfam lower-cases ids and turns every other character into '-'); one policy can match only one of them, so none is granted until all but one are removed",
		name, strings.Join(users, " and "), name)
}

// maxRoleKept bounds the role KeptContributorAnnotations keeps: a longer value is cut to this
// length, which no kfam role ("edit", "view", "admin") has, so it is still no contributor's role.
const maxRoleKept = 16

// userCutMarker ends a user KeptContributorAnnotations cut: a comma, which no valid identity
// contains (config.ValidateIdentity), so a cut value is never taken for anyone's id.
const userCutMarker = ", cut by the cache"

// KeptContributorAnnotations is what a cache must keep of the annotations of the RoleBinding
// named name for [ContributorsFrom] and [ContributorPolicies] to decide on it as on the whole
// binding: [UserAnnotation] and [RoleAnnotation] (nil when it has neither), each bounded, and
// nothing else. A role longer than 16 bytes is cut to 16: it is no kfam role before or after. A
// user longer than config.MaxIdentityLength is refused as too long whatever it holds, so:
//
//   - when name is kfam's name for it, the binding is a contributor whose policy is refused with
//     "RoleBinding <name>: no contributor policy: contributor.user: Too long: ...", an error that
//     quotes no value. The user is kept as the characters kfam's name is made of (lower-case
//     ASCII letters, digits, a dash for every other run), padded with dashes past the limit:
//     kfam's name for it is the same, so is the error, and it is no longer than name and 257
//     bytes.
//   - otherwise the binding is ignored with a warning that quotes the user; the user is cut to its
//     first bytes (whole UTF-8 characters) and ends in ", cut by the cache", so the warning says
//     it was cut, and the cut value is never one whose kfam name is name.
//
// Applied again to its result, with the same name, it changes nothing.
func KeptContributorAnnotations(name string, annotations map[string]string) map[string]string {
	user, hasUser := annotations[UserAnnotation]
	role, hasRole := annotations[RoleAnnotation]
	if !hasUser && !hasRole {
		return nil
	}
	kept := make(map[string]string, 2)
	if len(role) > maxRoleKept {
		role = role[:maxRoleKept]
	}
	if hasRole {
		kept[RoleAnnotation] = role
	}
	if hasUser {
		kept[UserAnnotation] = keptUser(name, user, role)
	}
	return kept
}

// keptUser is what KeptContributorAnnotations keeps of the user of the binding name with role
// role (already cut as it keeps it).
func keptUser(name, user, role string) string {
	if len(user) <= config.MaxIdentityLength {
		return user
	}
	if name == ContributorPolicyName(user, role) {
		// The user's other runs of characters became the name's dashes, and more dashes next to
		// them change nothing in it.
		kfams := strings.ToLower(notAlphanumeric.ReplaceAllString(user, "-"))
		if pad := config.MaxIdentityLength + 1 - len(kfams); pad > 0 {
			kfams += strings.Repeat("-", pad)
		}
		return kfams
	}
	prefix := user[:config.MaxIdentityLength-len(userCutMarker)-1]
	for len(prefix) > 0 && !utf8.ValidString(prefix) {
		prefix = prefix[:len(prefix)-1] // a character cut in two would be quoted as bytes
	}
	cut := prefix + userCutMarker
	if name == ContributorPolicyName(cut, role) {
		cut += "x" // a name made for the cut value must not make the binding kfam's
	}
	return cut
}
