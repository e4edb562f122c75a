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
// policies took some sixty allocations. Here a policy and its target take one allocation, and so
// does each kind of part under its rules (a from entry with its source, a to entry with its
// operation, a when entry, the strings), sized exactly: no more bytes than one by one, which the
// garbage collector would pay for. Every part belongs to exactly one policy and nothing in it is
// shared with the configuration or another policy, so a caller may change a returned policy
// freely.

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

// A rule has at most one entry in each of its from, to and when lists here; each entry is kept
// with the message it holds.
type (
	fromParts struct {
		list   [1]*securityv1beta1.Rule_From
		from   securityv1beta1.Rule_From
		source securityv1beta1.Source
	}
	toParts struct {
		list      [1]*securityv1beta1.Rule_To
		to        securityv1beta1.Rule_To
		operation securityv1beta1.Operation
	}
	whenParts struct {
		list      [1]*securityv1beta1.Condition
		condition securityv1beta1.Condition
	}
)

// rulesBuilder fills one policy's rules from storage allocated once, each kind taken from the
// front.
type rulesBuilder struct {
	rules      []*securityv1beta1.Rule
	storage    []securityv1beta1.Rule
	sources    []fromParts
	operations []toParts
	conditions []whenParts
	strings    []string
}

func newRules(n sizes) rulesBuilder {
	return rulesBuilder{
		rules:      make([]*securityv1beta1.Rule, 0, n.rules),
		storage:    make([]securityv1beta1.Rule, n.rules),
		sources:    make([]fromParts, n.sources),
		operations: make([]toParts, n.operations),
		conditions: make([]whenParts, n.conditions),
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
func (b *rulesBuilder) next() *securityv1beta1.Rule {
	r := take(&b.storage)
	b.rules = append(b.rules, r)
	return r
}

// source gives r its one from entry and returns its source, empty, to fill in.
func (b *rulesBuilder) source(r *securityv1beta1.Rule) *securityv1beta1.Source {
	p := take(&b.sources)
	p.from.Source = &p.source
	p.list[0] = &p.from
	r.From = p.list[:]
	return &p.source
}

// operation gives r its one to entry and returns its operation, empty, to fill in.
func (b *rulesBuilder) operation(r *securityv1beta1.Rule) *securityv1beta1.Operation {
	p := take(&b.operations)
	p.to.Operation = &p.operation
	p.list[0] = &p.to
	r.To = p.list[:]
	return &p.operation
}

// condition gives r its one when entry.
func (b *rulesBuilder) condition(r *securityv1beta1.Rule, key string, values []string) {
	p := take(&b.conditions)
	p.condition.Key, p.condition.Values = key, values
	p.list[0] = &p.condition
	r.When = p.list[:]
}

// onPorts limits r to ports (every port when empty).
func (b *rulesBuilder) onPorts(r *securityv1beta1.Rule, ports []int32) {
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
