package authz_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// opensToAll reports whether an ALLOW rule matches every request: Istio matches a rule when each
// of its from, to and when parts matches, and an empty part (or an empty source or operation)
// matches anything.
func opensToAll(r *securityv1beta1.Rule) bool {
	for _, f := range r.From {
		if s := f.Source; s != nil && (len(s.Principals)+len(s.Namespaces)+len(s.ServiceAccounts)+len(s.IpBlocks)) > 0 {
			return false
		}
	}
	for _, t := range r.To {
		if o := t.Operation; o != nil && (len(o.Paths)+len(o.Methods)+len(o.Ports)+len(o.Hosts)) > 0 {
			return false
		}
	}
	return len(r.When) == 0
}

// No owner policy rule admits every caller, whatever the health paths: an explicit empty list
// closes them, and must not leave behind a rule with an empty operation, which would match all.
func TestOwnerPolicyHasNoAllowAllRule(t *testing.T) {
	for name, body := range map[string]string{
		"default health paths": "",
		"no health paths":      "authorization: {healthPaths: []}\n",
		"sidecar, none":        "mesh: {mode: sidecar}\nauthorization: {healthPaths: []}\n",
	} {
		t.Run(name, func(t *testing.T) {
			cfg := fixture.Config(t, body)
			pol, err := authz.OwnerPolicy(cfg, ns, owner)
			require.NoError(t, err)
			for i, r := range pol.Spec.Rules {
				assert.False(t, opensToAll(r), "rules[%d] admits every caller: %v", i, r)
			}
			var paths []string
			for _, r := range pol.Spec.Rules {
				for _, to := range r.To {
					if len(r.From) == 0 && len(r.When) == 0 {
						paths = append(paths, to.Operation.Paths...)
					}
				}
			}
			assert.ElementsMatch(t, cfg.Authorization.HealthPaths, paths, "only the health paths are open without identity")
		})
	}
}
