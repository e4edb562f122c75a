package authz_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	securityv1beta1 "istio.io/api/security/v1beta1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
)

// Every L7 attribute counts whether it is stated positively or negated: a rule with only
// notPaths is as unenforceable at ztunnel as one with paths, so each field is checked on its own.
func TestL7AttributesSeeEachFieldAlone(t *testing.T) {
	from := func(s *securityv1beta1.Source) *securityv1beta1.AuthorizationPolicy {
		return &securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{From: []*securityv1beta1.Rule_From{{Source: s}}}}}
	}
	to := func(o *securityv1beta1.Operation) *securityv1beta1.AuthorizationPolicy {
		return &securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{To: []*securityv1beta1.Rule_To{{Operation: o}}}}}
	}
	when := func(key string) *securityv1beta1.AuthorizationPolicy {
		return &securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{When: []*securityv1beta1.Condition{{Key: key, Values: []string{"x"}}}}}}
	}
	one := []string{"x"}
	cases := map[string]struct {
		spec *securityv1beta1.AuthorizationPolicy
		want []string
	}{
		"requestPrincipals":    {from(&securityv1beta1.Source{RequestPrincipals: one}), []string{"rules[0].from[0].source.requestPrincipals"}},
		"notRequestPrincipals": {from(&securityv1beta1.Source{NotRequestPrincipals: one}), []string{"rules[0].from[0].source.requestPrincipals"}},
		"remoteIpBlocks":       {from(&securityv1beta1.Source{RemoteIpBlocks: one}), []string{"rules[0].from[0].source.remoteIpBlocks"}},
		"notRemoteIpBlocks":    {from(&securityv1beta1.Source{NotRemoteIpBlocks: one}), []string{"rules[0].from[0].source.remoteIpBlocks"}},
		"hosts":                {to(&securityv1beta1.Operation{Hosts: one}), []string{"rules[0].to[0].operation.hosts"}},
		"notHosts":             {to(&securityv1beta1.Operation{NotHosts: one}), []string{"rules[0].to[0].operation.hosts"}},
		"methods":              {to(&securityv1beta1.Operation{Methods: one}), []string{"rules[0].to[0].operation.methods"}},
		"notMethods":           {to(&securityv1beta1.Operation{NotMethods: one}), []string{"rules[0].to[0].operation.methods"}},
		"paths":                {to(&securityv1beta1.Operation{Paths: one}), []string{"rules[0].to[0].operation.paths"}},
		"notPaths":             {to(&securityv1beta1.Operation{NotPaths: one}), []string{"rules[0].to[0].operation.paths"}},
		// Both lists at once still name the attribute once.
		"paths and notPaths": {to(&securityv1beta1.Operation{Paths: one, NotPaths: one}), []string{"rules[0].to[0].operation.paths"}},
		// L4 attributes ztunnel enforces are not reported.
		"principals":       {from(&securityv1beta1.Source{Principals: one, NotNamespaces: one, IpBlocks: one}), nil},
		"ports":            {to(&securityv1beta1.Operation{Ports: one, NotPorts: one}), nil},
		"source.principal": {when("source.principal"), nil},
		"destination.port": {when("destination.port"), nil},
		"request.auth":     {when("request.auth.claims[groups]"), []string{`rules[0].when[0].key "request.auth.claims[groups]"`}},
		"plain key":        {when("connection.sni"), []string{"rules[0].when[0].key connection.sni"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, authz.L7Attributes(tc.spec))
		})
	}
}
