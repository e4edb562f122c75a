package authz_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// istioMatch is how Istio matches one value of a request.headers[...] condition against the
// header a request carries, written here from istio/istio pilot/pkg/security/authz/matcher
// (HeaderMatcher, header.go; StringMatcher, string.go) without using it: "*" alone asks only that
// the header be present, a leading '*' makes a suffix match (checked first, so "*a*" is the
// suffix "a*"), a trailing '*' a prefix match, and anything else an exact, case-sensitive match.
func istioMatch(value, header string) bool {
	switch {
	case value == "*":
		return true
	case strings.HasPrefix(value, "*"):
		return strings.HasSuffix(header, value[1:])
	case strings.HasSuffix(value, "*"):
		return strings.HasPrefix(header, value[:len(value)-1])
	default:
		return header == value
	}
}

// istioKind names the match Istio makes of value.
func istioKind(value string) string {
	switch {
	case value == "*":
		return presence
	case strings.HasPrefix(value, "*"):
		return suffix
	case strings.HasSuffix(value, "*"):
		return prefix
	}
	return exact
}

const (
	exact    = "exact"
	presence = "presence: every request that carries the header"
	prefix   = "prefix: every user id that starts with the value"
	suffix   = "suffix: every user id that ends with the value"
)

func TestIstioMatchModel(t *testing.T) {
	assert.True(t, istioMatch("*", "anyone@example.org"))
	assert.True(t, istioMatch("*@example.com", "mallory@example.com"))
	assert.False(t, istioMatch("*@example.com", "mallory@example.org"))
	assert.True(t, istioMatch("alice*", "alice.evil@example.org"))
	assert.True(t, istioMatch("*a*", "xa*"), "a leading star wins: the rest is a literal suffix")
	assert.False(t, istioMatch("*a*", "xab"))
	assert.True(t, istioMatch("a*b", "a*b"))
	assert.False(t, istioMatch("a*b", "axxb"), "a star inside is literal")
	assert.False(t, istioMatch("Alice@example.com", "alice@example.com"), "case-sensitive")
}

// Every class of identity, with the match Istio would make of the raw value (checked against the
// model above) and what the plugin does with it as a Profile owner and as a kfam contributor.
var identityClasses = []struct {
	name, value string
	istio       string // the match the raw value would get in a policy
	effect      string // what that would mean, for the reader
	refused     string // "" when accepted; else a part of the error
}{
	{"plain e-mail", "alice@example.com", exact, "only alice", ""},
	{"upper case", "Alice.Smith@Example.COM", exact, "only this spelling: the ingress must send the id exactly so", ""},
	{"star inside", "a*b@example.com", exact, "only a*b@example.com: a star inside is literal", ""},
	{"non-ASCII letters", "zoë@example.com", exact, "only zoë", ""},
	{"star", "*", presence, "every authenticated user", `Istio reads "*" as "any value"`},
	{"star domain", "*@example.com", suffix, "every user of example.com", `suffix match: it would match every value ending in "@example.com"`},
	{"trailing star", "user@example.com*", prefix, "user@example.com.attacker.org too", `prefix match: it would match every value starting with "user@example.com"`},
	{"stars at both ends", "*alice*", suffix, `every id ending in "alice*"`, "suffix match"},
	{"zero-width space", "ali\u200bce@example.com", exact, "a look-alike of alice@example.com", "U+200B"},
	{"RLO bidi control", "alice\u202e@example.com", exact, "a look-alike that displays reversed", "U+202E"},
	{"byte order mark", "\ufeffalice@example.com", exact, "a look-alike of alice@example.com", "U+FEFF"},
	{"Hangul filler", "alice\u3164@example.com", exact, "a look-alike of alice@example.com", "U+3164"},
	{"no-break space", "alice\u00a0smith@example.com", exact, "a look-alike of 'alice smith@example.com'", "U+00A0"},
	{"trailing space", "alice@example.com ", exact, "nothing: proxies trim the header", "white space"},
	{"CRLF", "alice@example.com\r\nkubeflow-userid: admin@example.com", exact, "a second, forged header line", "U+000D"},
	{"comma", "alice@example.com,admin@example.com", exact, "a forged pair of header values", "comma"},
	{"not UTF-8", "alice\xdd@example.com", exact, "something else once mangled", "UTF-8"},
	{"very long", strings.Repeat("a", 300) + "@example.com", exact, "one id, longer than any e-mail", "256"},
	{"empty", "", exact, "an empty header", "Required"},
}

func profileTarget(kind, ownerName string, observed ...client.Object) plugin.Target {
	p := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: profilev1.ProfileSpec{
		Owner: rbacv1.Subject{Kind: kind, APIGroup: rbacv1.GroupName, Name: ownerName},
	}}
	return plugin.Target{Namespace: ns, Owner: ownerName, Profile: p, Observed: plugin.Observed{Objects: observed}}
}

func TestIdentityClasses(t *testing.T) {
	cfg := config.Default()
	cfg.Authorization.Contributors = config.ContributorsByPlugin
	for _, tc := range identityClasses {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.istio, istioKind(tc.value), "the match the raw value would get")

			// As the Profile's owner.
			d, err := authz.New(cfg).Generate(profileTarget(rbacv1.UserKind, tc.value))
			require.NoError(t, err, "a refused owner never takes the namespace's protection down")
			ownerErr := errors.Join(d.Errors...)
			// As a contributor, in a RoleBinding exactly as kfam names it.
			binding := kfamBinding(tc.value, "edit")
			c, err := authz.New(cfg).Generate(profileTarget(rbacv1.UserKind, owner, binding))
			require.NoError(t, err, "a contributor never stops the owner's policy")

			if tc.refused != "" {
				require.Error(t, ownerErr)
				assertNoUserRule(t, d)
				assert.Contains(t, ownerErr.Error(), "spec.owner.name")
				assert.Contains(t, ownerErr.Error(), tc.refused)
				assert.Len(t, policyNames(c), 2, "owner and ztunnel policies only: no contributor policy")
				if tc.value == "" {
					assert.Empty(t, c.Errors, "a binding without a user is not a contributor's")
					return
				}
				require.Len(t, c.Errors, 1)
				assert.Contains(t, c.Errors[0].Error(), "RoleBinding "+binding.Name+": no contributor policy: contributor.user")
				assert.Contains(t, c.Errors[0].Error(), tc.refused)
				return
			}
			require.NoError(t, ownerErr)
			assertMatchesOnly(t, d.Objects[0].(*istiosecurityv1.AuthorizationPolicy), tc.value)
			require.Empty(t, c.Errors)
			require.Len(t, c.Objects, 3)
			contributor := c.Objects[2].(*istiosecurityv1.AuthorizationPolicy)
			assert.Equal(t, binding.Name, contributor.Name)
			assertMatchesOnly(t, contributor, tc.value)
		})
	}
}

func policyNames(d plugin.Desired) []string {
	var out []string
	for _, o := range d.Objects {
		out = append(out, o.GetName())
	}
	return out
}

// assertMatchesOnly checks that the header condition of pol's first rule admits user and no
// neighbour of it.
func assertMatchesOnly(t *testing.T, pol *istiosecurityv1.AuthorizationPolicy, user string) {
	t.Helper()
	values := pol.Spec.Rules[0].When[0].Values
	require.Equal(t, []string{user}, values)
	assert.True(t, istioMatch(values[0], user))
	for _, other := range []string{"", user + "x", "x" + user, user[:len(user)-1], strings.ToUpper(user) + "X"} {
		assert.False(t, istioMatch(values[0], other), "%q must not admit %q", values[0], other)
	}
}

func TestGroupOwnerIsRefused(t *testing.T) {
	d, err := authz.New(config.Default()).Generate(profileTarget(rbacv1.GroupKind, "ml-team"))
	require.NoError(t, err)
	require.Len(t, d.Errors, 1)
	assert.Equal(t, `spec.owner.kind: Invalid value: "Group": the owner policy matches the user-id header, which names one user, so the owner must be kind User; `+
		`make one person the owner and add the group's members as contributors; until it is fixed the owner policy admits no user`, d.Errors[0].Error())
	assertNoUserRule(t, d)

	d, err = authz.New(config.Default()).Generate(profileTarget(rbacv1.ServiceAccountKind, "default"))
	require.NoError(t, err)
	assert.ErrorContains(t, errors.Join(d.Errors...), `spec.owner.kind: Invalid value: "ServiceAccount"`)

	// An empty kind is a User: the API server refuses such a Profile, so only files lack it.
	d, err = authz.New(config.Default()).Generate(profileTarget("", owner))
	require.NoError(t, err)
	assertMatchesOnly(t, d.Objects[0].(*istiosecurityv1.AuthorizationPolicy), owner)
}

// The policy compares userIdPrefix+user, so the whole must be wildcard-free too. A validated
// configuration cannot have a prefix "*"; one that skipped Validate is still caught here.
func TestPrefixAndUserCombine(t *testing.T) {
	cfg := config.Default()
	cfg.Authorization.UserIDPrefix = "*"
	_, err := authz.OwnerPolicy(cfg, ns, "bob")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `spec.owner.name: Invalid value: "bob": with authorization.userIdPrefix "*" the policy would compare "*bob": Istio reads a leading '*' as a suffix match`)
	_, err = authz.ContributorPolicy(cfg, ns, "bob", "edit")
	assert.ErrorContains(t, err, `contributor.user: Invalid value: "bob": with authorization.userIdPrefix "*"`)

	cfg.Authorization.UserIDPrefix = "accounts.google.com:"
	require.NoError(t, cfg.Validate())
	_, err = authz.OwnerPolicy(cfg, ns, "alice*")
	assert.ErrorContains(t, err, "prefix match")
	pol, err := authz.OwnerPolicy(cfg, ns, strings.Repeat("a", 250))
	require.NoError(t, err, "only the user id's own length is bounded")
	assertMatchesOnly(t, pol, "accounts.google.com:"+strings.Repeat("a", 250))
}

// FuzzIdentityMatchesOnlyItself: for any user-id prefix the configuration accepts and any owner or
// contributor the plugin accepts, the value the policy compares matches, under Istio's header
// matching, exactly one user id: the ingress's prefix+user. Any other header value is refused.
func FuzzIdentityMatchesOnlyItself(f *testing.F) {
	for _, tc := range identityClasses {
		f.Add("", tc.value, tc.value+"@evil.org")
		f.Add("accounts.google.com:", tc.value, "accounts.google.com:"+tc.value+"x")
	}
	f.Add("*", "bob", "mallory-bob")
	f.Add("acc*", "bob", "acc*bob")
	f.Fuzz(func(t *testing.T, userIDPrefix, user, other string) {
		cfg := config.Default()
		cfg.Authorization.UserIDPrefix = userIDPrefix
		if cfg.Validate() != nil {
			return // refused configuration: no policy is ever made from it
		}
		id := userIDPrefix + user
		owner, ownerErr := authz.OwnerPolicy(cfg, ns, user)
		contributor, contribErr := authz.ContributorPolicy(cfg, ns, user, "view")
		if ownerErr != nil {
			require.Contains(t, ownerErr.Error(), "spec.owner.name")
			require.Error(t, contribErr, "one rule for owners and contributors")
			return
		}
		policies := []*istiosecurityv1.AuthorizationPolicy{owner}
		if contribErr == nil {
			policies = append(policies, contributor)
		} else {
			require.Contains(t, contribErr.Error(), "kfam cannot create the policy", "only the name can refuse a valid user")
		}
		for _, pol := range policies {
			values := pol.Spec.Rules[0].When[0].Values
			require.Len(t, values, 1)
			require.True(t, istioMatch(values[0], id), "%s: %q must admit its own user %q", pol.Name, values[0], id)
			for _, probe := range []string{other, "", id + "x", "x" + id, id[:len(id)-1], id[1:]} {
				if probe != id {
					require.False(t, istioMatch(values[0], probe), "%s: %q admits %q as well as %q", pol.Name, values[0], probe, id)
				}
			}
		}
	})
}

// kfam writes a policy for any binding, "*" included; in sidecar mode it opens the namespace. The
// plugin does not own it, so it reports it, naming the policy and the value, in either mode.
func TestForeignWildcardContributorPoliciesAreReported(t *testing.T) {
	kfamPolicy := func(name, user, value string) *istiosecurityv1.AuthorizationPolicy {
		pol, err := authz.ContributorPolicy(config.Default(), ns, "placeholder@example.com", "view")
		require.NoError(t, err)
		pol.Name, pol.Spec.TargetRefs = name, nil
		pol.Annotations = map[string]string{"user": user, "role": "view"}
		pol.Spec.Rules[0].When[0].Values = []string{value}
		return pol
	}
	everyone := kfamPolicy("user-clusterrole-view", "*", "*")
	ours := kfamPolicy("user-x-clusterrole-view", "*x", "*x")
	ours.Labels = map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: authz.PluginName}
	adminOwn := kfamPolicy("allow-any-authenticated", "", "*")
	adminOwn.Annotations = nil
	sidecarKfam, ambientPlugin := config.Default(), config.Default()
	sidecarKfam.Mesh.Mode = config.ModeSidecar
	ambientPlugin.Authorization.Contributors = config.ContributorsByPlugin
	for mode, cfg := range map[string]*config.Config{"sidecar, kfam": sidecarKfam, "ambient, plugin": ambientPlugin} {
		d, err := authz.New(cfg).Generate(profileTarget(rbacv1.UserKind, owner, everyone, ours, adminOwn))
		require.NoError(t, err)
		require.Len(t, d.Errors, 1, "%s: only the foreign kfam-annotated policy", mode)
		assert.Equal(t, `AuthorizationPolicy user-clusterrole-view (not made by this plugin, for user "*"): spec.rules[0].when[0].values[0]: Invalid value: "*": Istio reads "*" as "any value": it would match every caller; an identity must name exactly one caller; it is left alone: delete it and its RoleBinding`,
			d.Errors[0].Error())
	}
}

// Both contributor roles kfam writes are checked; a policy with another role (the owner's, or one
// an admin wrote by hand) is not a contributor's and is not this check's concern.
func TestForeignWildcardContributorPoliciesOfEitherRole(t *testing.T) {
	cfg := config.Default()
	cfg.Mesh.Mode = config.ModeSidecar
	for role, reported := range map[string]bool{"edit": true, "view": true, "admin": false, "": false} {
		t.Run(role, func(t *testing.T) {
			pol, err := authz.ContributorPolicy(config.Default(), ns, "placeholder@example.com", "edit")
			require.NoError(t, err)
			pol.Name, pol.Spec.TargetRefs = "user-clusterrole-"+role, nil
			pol.Annotations = map[string]string{"user": "*", "role": role}
			pol.Spec.Rules[0].When[0].Values = []string{"*"}
			d, err := authz.New(cfg).Generate(profileTarget(rbacv1.UserKind, owner, pol))
			require.NoError(t, err)
			if !reported {
				assert.Empty(t, d.Errors)
				return
			}
			require.Len(t, d.Errors, 1)
			assert.Contains(t, d.Errors[0].Error(), "AuthorizationPolicy user-clusterrole-"+role+" (not made by this plugin")
		})
	}
}

// Several foreign wildcard policies give one error each, in the same order whatever order the
// cache returns them in.
func TestForeignWildcardContributorPoliciesAreSorted(t *testing.T) {
	cfg := config.Default()
	cfg.Mesh.Mode = config.ModeSidecar
	var pols []client.Object
	for _, name := range []string{"user-c-clusterrole-edit", "user-a-clusterrole-edit", "user-b-clusterrole-view"} {
		pol, err := authz.ContributorPolicy(config.Default(), ns, "placeholder@example.com", "edit")
		require.NoError(t, err)
		pol.Name, pol.Spec.TargetRefs = name, nil
		pol.Annotations = map[string]string{"user": "*", "role": "edit"}
		pol.Spec.Rules[0].When[0].Values = []string{"*"}
		pols = append(pols, pol)
	}
	d, err := authz.New(cfg).Generate(profileTarget(rbacv1.UserKind, owner, pols...))
	require.NoError(t, err)
	require.Len(t, d.Errors, 3)
	for i, name := range []string{"user-a-clusterrole-edit", "user-b-clusterrole-view", "user-c-clusterrole-edit"} {
		assert.Contains(t, d.Errors[i].Error(), "AuthorizationPolicy "+name+" ")
	}
}
