package authz

import (
	"fmt"
	"strings"

	securityv1beta1 "istio.io/api/security/v1beta1"
)

// l4ConditionKeys are the when-keys ztunnel can evaluate.
var l4ConditionKeys = map[string]bool{
	"source.ip": true, "source.namespace": true, "source.principal": true,
	"destination.ip": true, "destination.port": true,
}

// L7Attributes lists, as "rules[i].<path>", every attribute of the policy spec that ztunnel cannot
// enforce: request principals, remote IPs, hosts, methods, paths and any condition key other than
// source.ip, source.namespace, source.principal, destination.ip and destination.port. Ztunnel
// drops an ALLOW rule that uses one (so it matches nothing) and strips them from DENY rules, so a
// policy without targetRefs must return none.
func L7Attributes(spec *securityv1beta1.AuthorizationPolicy) []string {
	var out []string
	for i, r := range spec.GetRules() {
		at := func(format string, args ...any) {
			out = append(out, fmt.Sprintf("rules[%d].", i)+fmt.Sprintf(format, args...))
		}
		for j, f := range r.GetFrom() {
			s := f.GetSource()
			if len(s.GetRequestPrincipals())+len(s.GetNotRequestPrincipals()) > 0 {
				at("from[%d].source.requestPrincipals", j)
			}
			if len(s.GetRemoteIpBlocks())+len(s.GetNotRemoteIpBlocks()) > 0 {
				at("from[%d].source.remoteIpBlocks", j)
			}
		}
		for j, t := range r.GetTo() {
			o := t.GetOperation()
			if len(o.GetHosts())+len(o.GetNotHosts()) > 0 {
				at("to[%d].operation.hosts", j)
			}
			if len(o.GetMethods())+len(o.GetNotMethods()) > 0 {
				at("to[%d].operation.methods", j)
			}
			if len(o.GetPaths())+len(o.GetNotPaths()) > 0 {
				at("to[%d].operation.paths", j)
			}
		}
		for j, c := range r.GetWhen() {
			if !l4ConditionKeys[c.GetKey()] {
				at("when[%d].key %s", j, quoteKey(c.GetKey()))
			}
		}
	}
	return out
}

func quoteKey(k string) string {
	if strings.ContainsAny(k, " []") {
		return fmt.Sprintf("%q", k)
	}
	return k
}
