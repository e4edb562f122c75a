package authz

import (
	"strconv"

	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// A policy is a tree of small protobuf messages: each rule has a from entry, a source, a to entry,
// an operation, a condition, and a string list in each. Allocated one by one, a namespace's two
// policies took some sixty allocations. Here a policy and its target take one allocation, and each
// kind of message under its rules one more, sized exactly (so no more bytes than one by one,
// which the garbage collector would pay for). Every part belongs to exactly one policy and
// nothing in it is shared with the configuration or another policy, so a caller may change a
// returned policy freely.

// policyParts is a policy with room for the one targetRef the policies here may have.
type policyParts struct {
	policy     istiosecurityv1.AuthorizationPolicy
	targetRefs [1]*typev1beta1.PolicyTargetReference
	target     typev1beta1.PolicyTargetReference
}

// targetGateway attaches the policy to the waypoint Gateway, as [GatewayTarget] names it.
func (p *policyParts) targetGateway(name string) {
	p.target.Group, p.target.Kind, p.target.Name = gatewayv1.GroupName, "Gateway", name
	p.targetRefs[0] = &p.target
	p.policy.Spec.TargetRefs = p.targetRefs[:]
}

// sizes counts what a policy's rules hold.
type sizes struct{ rules, sources, operations, conditions, strings int }

func (s sizes) plus(o sizes) sizes {
	return sizes{s.rules + o.rules, s.sources + o.sources, s.operations + o.operations, s.conditions + o.conditions, s.strings + o.strings}
}

// ruleParts is one rule with its from, to and when lists: the rules here have at most one entry
// in each.
type ruleParts struct {
	rule     securityv1beta1.Rule
	from     [1]*securityv1beta1.Rule_From
	fromItem securityv1beta1.Rule_From
	to       [1]*securityv1beta1.Rule_To
	toItem   securityv1beta1.Rule_To
	when     [1]*securityv1beta1.Condition
}

// rulesBuilder fills one policy's rules from storage allocated once, each kind taken from the
// front.
type rulesBuilder struct {
	rules      []*securityv1beta1.Rule
	parts      []ruleParts
	sources    []securityv1beta1.Source
	operations []securityv1beta1.Operation
	conditions []securityv1beta1.Condition
	strings    []string
}

func newRules(n sizes) rulesBuilder {
	return rulesBuilder{
		rules:      make([]*securityv1beta1.Rule, 0, n.rules),
		parts:      make([]ruleParts, n.rules),
		sources:    make([]securityv1beta1.Source, n.sources),
		operations: make([]securityv1beta1.Operation, n.operations),
		conditions: make([]securityv1beta1.Condition, n.conditions),
		strings:    make([]string, n.strings),
	}
}

// take takes the first item of pool. A count too small costs an allocation more, never a wrong
// policy.
func take[T any](pool *[]T) *T {
	if len(*pool) == 0 {
		*pool = make([]T, 1)
	}
	item := &(*pool)[0]
	*pool = (*pool)[1:]
	return item
}

// next is a new empty rule, already in the list.
func (b *rulesBuilder) next() *ruleParts {
	r := take(&b.parts)
	b.rules = append(b.rules, &r.rule)
	return r
}

// source gives r its one from entry and returns its source, empty, to fill in.
func (b *rulesBuilder) source(r *ruleParts) *securityv1beta1.Source {
	src := take(&b.sources)
	r.fromItem.Source = src
	r.from[0] = &r.fromItem
	r.rule.From = r.from[:]
	return src
}

// operation gives r its one to entry and returns its operation, empty, to fill in.
func (b *rulesBuilder) operation(r *ruleParts) *securityv1beta1.Operation {
	op := take(&b.operations)
	r.toItem.Operation = op
	r.to[0] = &r.toItem
	r.rule.To = r.to[:]
	return op
}

// condition gives r its one when entry.
func (b *rulesBuilder) condition(r *ruleParts, key string, values []string) {
	c := take(&b.conditions)
	c.Key, c.Values = key, values
	r.when[0] = c
	r.rule.When = r.when[:]
}

// onPorts limits r to ports (every port when empty).
func (b *rulesBuilder) onPorts(r *ruleParts, ports []int32) {
	if len(ports) > 0 {
		b.operation(r).Ports = b.ports(ports)
	}
}

// strs is room for n strings of the policy's own; its capacity ends with it, so appending to one
// list never writes into the next.
func (b *rulesBuilder) strs(n int) []string {
	if n == 0 {
		return nil
	}
	if len(b.strings) < n {
		b.strings = make([]string, n)
	}
	out := b.strings[:n:n]
	b.strings = b.strings[n:]
	return out
}

// list is a copy of ss, or nil when it is empty (as protobuf omits it).
func (b *rulesBuilder) list(ss ...string) []string {
	out := b.strs(len(ss))
	copy(out, ss)
	return out
}

// ports are the ports as the policy writes them, decimal strings.
func (b *rulesBuilder) ports(ports []int32) []string {
	out := b.strs(len(ports))
	for i, p := range ports {
		out[i] = strconv.Itoa(int(p))
	}
	return out
}
