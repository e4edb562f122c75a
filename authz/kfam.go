package authz

import (
	"fmt"
	"sort"
	"time"

	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// WithdrawnAnnotation marks a contributor policy the plugin emptied because its RoleBinding went:
// the time it was emptied (RFC 3339, UTC), from which authorization.kfamGracePeriod counts until
// the plugin deletes it.
const WithdrawnAnnotation = "profile-plugins.kubeflow-ambient.io/withdrawn-at"

// kfam's two requests per change (kubeflow/dashboard components/access-management/kfam/bindings.go,
// BindingClient.Create and Delete) each fail when the plugin got there first: Create makes the
// RoleBinding and then POSTs the policy, which is AlreadyExists if the plugin, woken by the
// binding, created it; Delete reads the binding and the policy, deletes the binding and then the
// policy, which is NotFound if the plugin, woken by the binding's deletion, deleted it. kfam
// answers the dashboard with that error although the change was made. So, with a grace period:
//
//   - a policy that does not exist for a binding younger than the grace period is not created:
//     kfam's POST comes first, and the plugin takes that policy over (Adopt) in its next call;
//   - a policy kfam made (another field manager than the plugin's still holds fields of it)
//     whose binding is gone is emptied at once (an ALLOW policy without rules matches nothing,
//     and next to the owner policy's it takes nothing away from anyone) and deleted only once the
//     grace period has passed since, so kfam's DELETE finds it. A policy only the plugin ever
//     wrote is deleted with its binding, as before: kfam never made it, and one the plugin wrote
//     again after kfam's DELETE (an apply racing that DELETE creates the object anew: server-side
//     apply creates a missing object even when the body names a resourceVersion) must not stand
//     in the way of kfam's next POST for the same contributor.
//
// Neither wait grants anything: a new contributor reaches the namespace once a policy with the
// header rule is there, as before; a removed one loses it as soon as the plugin sees the binding
// gone, as before. Only the objects' lifetimes change.

// kfamClock says what time it is for the waits; it is the only input of Generate beyond the
// Target, so tests replace it.
type kfamClock func() time.Time

// contributorsByPlugin adds what authorization.contributors "plugin" wants to d: each
// contributor's policy, or the reason it waits for kfam, and each withdrawn policy still left for
// kfam's delete.
func (p *Plugin) contributorsByPlugin(t plugin.Target, d *plugin.Desired) {
	bindings := roleBindings(t.Observed)
	contributors, ignored := ContributorsFrom(bindings)
	sort.Strings(ignored)
	d.Warnings = append(d.Warnings, ignored...)
	// A contributor refused here loses only its own policy; the owner keeps access.
	pols, errs := p.policies.contributorPolicies(t.Namespace, contributors)
	d.Errors = append(d.Errors, errs...)
	now, grace := p.now(), p.grace()
	created := map[string]time.Time{}
	for _, b := range bindings {
		created[b.GetName()] = b.GetCreationTimestamp().Time
	}
	wanted := map[string]bool{}
	for _, pol := range pols {
		wanted[pol.Name] = true
		ref := plugin.Ref{GroupKind: policyGK, Name: pol.Name}
		if _, observed := plugin.Lookup[*istiosecurityv1.AuthorizationPolicy](t.Observed, pol.Name); observed {
			d.Objects = append(d.Objects, pol)
			d.Adopt = append(d.Adopt, ref)
			continue
		}
		if until := created[pol.Name].Add(grace); now.Before(until) {
			d.Waiting = append(d.Waiting, fmt.Sprintf("AuthorizationPolicy %s is left to kfam, which creates it right after RoleBinding %s, until %s; then the plugin creates it",
				pol.Name, pol.Name, until.UTC().Format(time.RFC3339)))
			continue
		}
		d.Objects = append(d.Objects, pol)
		d.Adopt = append(d.Adopt, ref)
	}
	p.withdrawnContributors(t, wanted, now, grace, d)
}

// withdrawnContributors keeps, emptied, each contributor policy of the plugin's that no contributor
// wants any more, until the grace period since it was emptied has passed; then the runner
// prunes it as any object the plugin no longer wants.
func (p *Plugin) withdrawnContributors(t plugin.Target, wanted map[string]bool, now time.Time, grace time.Duration, d *plugin.Desired) {
	if grace <= 0 {
		return
	}
	for _, o := range t.Observed.Objects {
		pol, ok := o.(*istiosecurityv1.AuthorizationPolicy)
		if !ok || wanted[pol.Name] || !p.isOwnContributorPolicy(pol) || !kfamMadeIt(pol) {
			continue
		}
		since := withdrawnSince(pol, now)
		until := since.Add(grace)
		if !now.Before(until) {
			continue
		}
		d.Objects = append(d.Objects, p.policies.withdrawnPolicy(pol, since))
		// kfam's DELETE is coming: an update of the runner's that meets it must not bring it back.
		d.Adopt = append(d.Adopt, plugin.Ref{GroupKind: policyGK, Name: pol.Name})
		d.Waiting = append(d.Waiting, fmt.Sprintf("AuthorizationPolicy %s admits no one since its RoleBinding went; it is left for kfam to delete until %s, then deleted",
			pol.Name, until.UTC().Format(time.RFC3339)))
	}
}

// isOwnContributorPolicy says whether pol is a contributor policy this plugin wrote: the runner
// shows another writer's object without the managed labels, so those labels are proof.
func (p *Plugin) isOwnContributorPolicy(pol *istiosecurityv1.AuthorizationPolicy) bool {
	a := p.cfg.Authorization
	if pol.Name == a.OwnerPolicyName || pol.Name == a.ZtunnelPolicyName || !plugin.IsManagedBy(pol.Labels, PluginName) {
		return false
	}
	role := pol.Annotations[RoleAnnotation]
	return role == RoleEdit || role == RoleView
}

// kfamMadeIt says whether another writer than this plugin (kfam, whose POST created the policy
// and whose fields the takeover shared) holds fields of pol: then kfam's DELETE is coming.
func kfamMadeIt(pol *istiosecurityv1.AuthorizationPolicy) bool {
	own := plugin.FieldManager(PluginName)
	for _, e := range pol.ManagedFields {
		if e.Manager != own && e.Subresource == "" {
			return true
		}
	}
	return false
}

// withdrawnSince is when pol was emptied, or now if it has not been (or its mark does not parse:
// the wait then starts again, and the policy admits no one meanwhile).
func withdrawnSince(pol *istiosecurityv1.AuthorizationPolicy, now time.Time) time.Time {
	if v, ok := pol.Annotations[WithdrawnAnnotation]; ok {
		if at, err := time.Parse(time.RFC3339, v); err == nil {
			return at
		}
	}
	return now.UTC().Truncate(time.Second)
}

// withdrawnPolicy is cur emptied: its name, user and role, attached where a contributor policy
// is, and no rules, so it matches no request.
func (b *builder) withdrawnPolicy(cur *istiosecurityv1.AuthorizationPolicy, since time.Time) *istiosecurityv1.AuthorizationPolicy {
	p := newPolicy(cur.Name, cur.Namespace, map[string]string{
		UserAnnotation:      cur.Annotations[UserAnnotation],
		RoleAnnotation:      cur.Annotations[RoleAnnotation],
		WithdrawnAnnotation: since.UTC().Format(time.RFC3339),
	})
	if b.cfg.Mesh.Mode == config.ModeAmbient {
		p.targetGateway(b.cfg.Mesh.Waypoint.Name)
	}
	return &p.policy
}

// grace is authorization.kfamGracePeriod (its default when a configuration skipped SetDefaults).
func (p *Plugin) grace() time.Duration {
	if g := p.cfg.Authorization.KfamGracePeriod; g != nil {
		return g.Duration
	}
	return config.DefaultKfamGracePeriod
}
