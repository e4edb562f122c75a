package authz

import (
	"fmt"
	"sort"

	"istio.io/api/label"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
)

// PluginName is the plugin's name: its field manager and the value of plugin.PluginLabel.
const PluginName = "authz"

// Plugin is the access plugin. Create it with New.
type Plugin struct{ cfg *config.Config }

var _ plugin.Plugin = (*Plugin)(nil)

// New returns the plugin for a validated configuration.
func New(cfg *config.Config) *Plugin { return &Plugin{cfg: cfg} }

// Name implements plugin.Plugin.
func (p *Plugin) Name() string { return PluginName }

// Kinds implements plugin.Plugin. RoleBindings are only read: they say who the contributors are.
func (p *Plugin) Kinds() []client.ObjectList {
	return []client.ObjectList{&istiosecurityv1.AuthorizationPolicyList{}, &rbacv1.RoleBindingList{}}
}

var policyGK = schema.GroupKind{Group: istiosecurityv1.SchemeGroupVersion.Group, Kind: "AuthorizationPolicy"}

// Generate implements plugin.Plugin.
func (p *Plugin) Generate(t plugin.Target) (plugin.Desired, error) {
	cfg := p.cfg
	var d plugin.Desired
	// After a switch away from ambient the runner keeps the namespace there while pods depend on
	// it (see plugin.DataPlane); the L4 policy that protects them stays, intact, as long as it does.
	if cfg.Mesh.Mode == config.ModeAmbient || t.Observed.Held[label.IoIstioDataplaneMode.Name] == "ambient" {
		d.Objects = append(d.Objects, ZtunnelPolicy(cfg, t.Namespace))
	}
	if cfg.Mesh.Mode == config.ModeNone {
		return d, nil
	}
	owner, err := OwnerPolicy(cfg, t.Namespace, t.Owner)
	if err != nil {
		return plugin.Desired{}, err
	}
	d.Objects = append([]client.Object{owner}, d.Objects...)
	if cfg.Authorization.AdoptOwnerPolicy {
		d.Adopt = append(d.Adopt, plugin.Ref{GroupKind: policyGK, Name: owner.Name})
	}

	switch cfg.Authorization.Contributors {
	case config.ContributorsByPlugin:
		var bindings []*rbacv1.RoleBinding
		for _, o := range t.Observed.Objects {
			if b, ok := o.(*rbacv1.RoleBinding); ok {
				bindings = append(bindings, b)
			}
		}
		contributors := ContributorsFrom(bindings)
		sort.Slice(contributors, func(i, j int) bool {
			return ContributorPolicyName(contributors[i].User, contributors[i].Role) < ContributorPolicyName(contributors[j].User, contributors[j].Role)
		})
		for _, c := range contributors {
			pol, err := ContributorPolicy(cfg, t.Namespace, c.User, c.Role)
			if err != nil {
				// One bad binding must not take the owner's access down with it.
				d.Warnings = append(d.Warnings, fmt.Sprintf("RoleBinding %s: no contributor policy: %v", ContributorPolicyName(c.User, c.Role), err))
				continue
			}
			d.Objects = append(d.Objects, pol)
			d.Adopt = append(d.Adopt, plugin.Ref{GroupKind: policyGK, Name: pol.Name})
		}
	case config.ContributorsByKfam:
		if cfg.Mesh.Mode == config.ModeAmbient {
			d.Warnings = append(d.Warnings, detachedContributorPolicies(t.Observed)...)
		}
	}
	return d, nil
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
