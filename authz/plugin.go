package authz

import (
	"fmt"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"
	"istio.io/api/label"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// PluginName is the plugin's name: its field manager and the value of plugin.PluginLabel.
const PluginName = "authz"

// Plugin is the access plugin. Create it with New.
type Plugin struct {
	cfg      *config.Config
	policies *builder
	// now times the waits for kfam (see contributorsByPlugin).
	now kfamClock
}

var _ plugin.Plugin = (*Plugin)(nil)

// New returns the plugin for a validated configuration. It works out what every policy has in
// common once, here: change the configuration before New, never after.
func New(cfg *config.Config) *Plugin {
	return &Plugin{cfg: cfg, policies: newBuilder(cfg), now: time.Now}
}

// Name implements plugin.Plugin.
func (p *Plugin) Name() string { return PluginName }

// Kinds implements plugin.Plugin. RoleBindings are only read, and only their names and
// annotations (who the contributors are), so they are listed as metadata: a controller that
// watches them with builder.OnlyMetadata then caches no roleRefs or subjects.
func (p *Plugin) Kinds() []client.ObjectList {
	return []client.ObjectList{&istiosecurityv1.AuthorizationPolicyList{}, RoleBindingMetadataList()}
}

// RoleBindingMetadataList is the metadata-only list of RoleBindings the plugin reads.
func RoleBindingMetadataList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBindingList"))
	return l
}

var policyGK = schema.GroupKind{Group: istiosecurityv1.SchemeGroupVersion.Group, Kind: "AuthorizationPolicy"}

// Generate implements plugin.Plugin.
func (p *Plugin) Generate(t plugin.Target) (plugin.Desired, error) {
	cfg := p.cfg
	var d plugin.Desired
	var ztunnel *istiosecurityv1.AuthorizationPolicy
	// After a switch away from ambient the runner keeps the namespace there while pods depend on
	// it (see plugin.DataPlane); the L4 policy that protects them stays, intact, as long as it does.
	if cfg.Mesh.Mode == config.ModeAmbient || t.Observed.Held[label.IoIstioDataplaneMode.Name] == "ambient" {
		ztunnel = p.policies.ztunnelPolicy(t.Namespace)
	}
	switch {
	case cfg.Mesh.Mode == config.ModeAmbient:
		d.Warnings = append(d.Warnings, sidecarCallerLosses(cfg)...)
	case ztunnel != nil:
		// The ztunnel policy has no selector, so the sidecars of a sidecar-mode namespace apply it
		// too, and its L4 rule for a sidecar caller lifts that caller's L7 limits there as well.
		for _, loss := range sidecarCallerLosses(cfg) {
			d.Warnings = append(d.Warnings, "istio.io/dataplane-mode=ambient stays on this sidecar-mode namespace (pods it captures, or another writer, keep it), "+
				"and with it the ztunnel policy, which the sidecars apply too: "+loss)
		}
	}
	if cfg.Mesh.Mode == config.ModeNone {
		if ztunnel != nil {
			d.Objects = []client.Object{ztunnel}
		}
		return d, nil
	}
	owner, err := p.ownerPolicy(t)
	if err != nil {
		// A Profile edit must not take the namespace's protection down, nor leave access with
		// the owner it no longer names: the policy stays, intact, without any user's rule.
		d.Errors = append(d.Errors, fmt.Errorf("%w; until it is fixed the owner policy admits no user", err))
		owner = p.policies.policyForOwner(t.Namespace, "")
	}
	if cfg.Mesh.Mode == config.ModeAmbient && !p.ownerPolicyMayMoveToWaypoint(t) {
		owner.Spec.TargetRefs = nil
		d.Waiting = append(d.Waiting, fmt.Sprintf("AuthorizationPolicy %s keeps applying to the namespace's pods, for those that still run a sidecar, "+
			"until AuthorizationPolicy %s is in place and intact; then it moves to the waypoint", owner.Name, cfg.Authorization.ZtunnelPolicyName))
	}
	d.Objects = append(make([]client.Object, 0, 2), owner)
	if ztunnel != nil {
		d.Objects = append(d.Objects, ztunnel)
	}
	if cfg.Authorization.AdoptOwnerPolicy {
		d.Adopt = append(d.Adopt, plugin.Ref{GroupKind: policyGK, Name: owner.Name})
	}

	switch cfg.Authorization.Contributors {
	case config.ContributorsByPlugin:
		p.contributorsByPlugin(t, &d)
	case config.ContributorsByKfam:
		if cfg.Mesh.Mode == config.ModeAmbient {
			d.Warnings = append(d.Warnings, detachedContributorPolicies(t.Observed)...)
		}
	}
	d.Errors = append(d.Errors, foreignContributorWildcards(p.policies.headerKey, t.Observed)...)
	d.Warnings = append(d.Warnings, foreignAllowAll(cfg, t.Observed)...)
	return d, nil
}

// ownerPolicyMayMoveToWaypoint says whether, in ambient mode, the owner policy may be attached to
// the waypoint (targetRefs) now. Pods that still run a sidecar ignore policies with targetRefs,
// and a pod with no ALLOW policy that applies to it admits every caller. So a selector-less owner
// policy (sidecar mode's, or the profiles controller's that adoptOwnerPolicy takes over) keeps
// that form until the ztunnel policy, which sidecars enforce too (namespace-wide, no targetRefs)
// and which admits less, was observed in place and intact: then the move takes nothing away from
// any pod. Meanwhile the selector-less owner policy is harmless at ztunnel: ztunnel drops ALLOW
// rules with L7 attributes, which is more restrictive, and its remaining L4 rules (the namespace
// itself, platform callers without methods or paths, such as the Katib controller) admit no one
// the waypoint would not admit anyway
// (/work/shared/context/istio-ambient.md, "AuthorizationPolicy in ambient"). No owner policy at
// all, or one already attached to a waypoint, protects no sidecar pod: it goes (or stays) there
// at once, so a drifted or deleted ztunnel policy never takes the owner policy off the waypoint.
func (p *Plugin) ownerPolicyMayMoveToWaypoint(t plugin.Target) bool {
	cfg := p.cfg
	cur, ok := plugin.Lookup[*istiosecurityv1.AuthorizationPolicy](t.Observed, cfg.Authorization.OwnerPolicyName)
	if !ok || len(cur.Spec.TargetRefs) > 0 {
		return true
	}
	// A namespace already routed through the waypoint needs the policy there at once: another
	// writer took its targetRefs, and the waypoint would otherwise pass anyone.
	if t.Observed.Labels[label.IoIstioUseWaypoint.Name] != "" || t.Observed.Labels[label.IoIstioIngressUseWaypoint.Name] != "" {
		return true
	}
	z, ok := plugin.Lookup[*istiosecurityv1.AuthorizationPolicy](t.Observed, cfg.Authorization.ZtunnelPolicyName)
	return ok && plugin.IsManagedBy(z.Labels, PluginName) &&
		proto.Equal(&z.Spec, &p.policies.ztunnelPolicy(t.Namespace).Spec)
}

// foreignContributorWildcards reports contributor policies that kfam (or anyone but this plugin)
// made with a user id this package refuses, such as kfam's policy for a binding with user "*":
// kfam does not check, and in sidecar mode such a policy opens the namespace. The plugin does not
// own it and leaves it alone, so the error says to delete it.
func foreignContributorWildcards(key string, obs plugin.Observed) []error {
	var errs []error
	for _, o := range obs.Objects {
		pol, ok := o.(*istiosecurityv1.AuthorizationPolicy)
		if !ok || plugin.IsManagedBy(pol.Labels, PluginName) {
			continue
		}
		if role := pol.Annotations[RoleAnnotation]; pol.Annotations[UserAnnotation] == "" || (role != RoleEdit && role != RoleView) {
			continue
		}
		for _, e := range refusedHeaderValues(pol, key) {
			errs = append(errs, fmt.Errorf("AuthorizationPolicy %s (not made by this plugin, for user %q): %w; it is left alone: delete it and its RoleBinding",
				pol.Name, pol.Annotations[UserAnnotation], e))
		}
	}
	// Observed objects come in the cache's order; the result must not.
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

// refusedHeaderValues checks every value pol compares with the header key as an identity. Length
// is not its concern: a long id is no wildcard.
func refusedHeaderValues(pol *istiosecurityv1.AuthorizationPolicy, key string) field.ErrorList {
	var out field.ErrorList
	for i, r := range pol.Spec.Rules {
		for j, c := range r.When {
			if c.Key != key {
				continue
			}
			for k, v := range c.Values {
				path := field.NewPath("spec", "rules").Index(i).Child("when").Index(j).Child("values").Index(k)
				for _, e := range config.ValidateIdentity(path, v) {
					if e.Type != field.ErrorTypeTooLong {
						out = append(out, e)
					}
				}
			}
		}
	}
	return out
}

// ownerPolicy is the owner policy for the Profile's owner, or the error that refuses it.
func (p *Plugin) ownerPolicy(t plugin.Target) (*istiosecurityv1.AuthorizationPolicy, error) {
	if err := ownerKindIsUser(t); err != nil {
		return nil, err
	}
	return p.policies.ownerPolicy(t.Namespace, t.Owner)
}

// ownerKindIsUser refuses a Profile owned by a Group or a ServiceAccount: the owner policy
// matches the user-id header, which names one person, so a group's name there would match a user
// who happens to be called like the group. An empty kind counts as User: the API server refuses a
// Profile without one (the CRD requires it), so only a Profile read from a file lacks it.
func ownerKindIsUser(t plugin.Target) error {
	if t.Profile == nil {
		return nil
	}
	switch kind := t.Profile.Spec.Owner.Kind; kind {
	case rbacv1.UserKind, "":
		return nil
	default:
		return field.Invalid(field.NewPath("spec", "owner", "kind"), kind,
			"the owner policy matches the user-id header, which names one user, so the owner must be kind User; "+
				"make one person the owner and add the group's members as contributors")
	}
}

// roleBindings are the observed RoleBindings, as full objects or as metadata.
func roleBindings(obs plugin.Observed) []metav1.Object {
	var out []metav1.Object
	for _, o := range obs.Objects {
		switch b := o.(type) {
		case *rbacv1.RoleBinding:
			out = append(out, b)
		case *metav1.PartialObjectMetadata:
			if b.GroupVersionKind().GroupKind() == rbacv1.SchemeGroupVersion.WithKind("RoleBinding").GroupKind() {
				out = append(out, b)
			}
		}
	}
	return out
}

// detachedContributorPolicies warns about kfam policies that ambient mode makes useless: without
// targetRefs ztunnel enforces them, drops their header rule, and so denies the contributor.
func detachedContributorPolicies(obs plugin.Observed) []string {
	var out []string
	for _, o := range obs.Objects {
		pol, ok := o.(*istiosecurityv1.AuthorizationPolicy)
		if !ok || pol.Annotations[UserAnnotation] == "" || pol.Annotations[RoleAnnotation] == RoleAdmin || len(pol.Spec.TargetRefs) > 0 {
			continue
		}
		if plugin.IsManagedBy(pol.Labels, PluginName) {
			continue
		}
		out = append(out, fmt.Sprintf("contributor policy %s has no targetRefs: in ambient mode ztunnel drops its header rule, so %s is denied; set authorization.contributors to \"plugin\"",
			pol.Name, pol.Annotations[UserAnnotation]))
	}
	sort.Strings(out)
	return out
}
