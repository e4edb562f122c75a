package authz

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	securityv1beta1 "istio.io/api/security/v1beta1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// maxRanges bounds the address ranges of one policy the evaluation looks at: it walks every
// stretch of addresses between their bounds, and a foreign policy is anyone's input.
const maxRanges = 1024

// openness is what [evaluateOpenness] found: the address families in which every mesh caller and
// every plaintext caller is admitted, whether the policy names callers it keeps out, and whether
// it was too large to evaluate.
type openness struct {
	mesh, plaintext [2]bool // [0] IPv4, [1] IPv6
	names           bool
	tooLarge        int // the policy's number of address ranges, when above maxRanges
}

// open says whether every mesh caller of some address family is admitted.
func (o openness) open() bool { return o.mesh[0] || o.mesh[1] }

// who says whom the policy admits, for the warning: "every caller", narrowed as far as it must be
// to be true.
func (o openness) who() string {
	s := "every caller"
	if (o.mesh[0] && !o.plaintext[0]) || (o.mesh[1] && !o.plaintext[1]) {
		s = "every mesh caller"
	}
	if o.names {
		s += " it does not name"
	}
	switch {
	case o.mesh[0] && !o.mesh[1]:
		s += " over IPv4"
	case o.mesh[1] && !o.mesh[0]:
		s += " over IPv6"
	}
	return s
}

// evaluateOpenness asks of an ALLOW policy's rules, enforced by ztunnel (l4) or by Envoy (a
// sidecar or the waypoint), whether there is a caller they refuse. It judges the policy, not its
// shape: every rule, source, operation and condition is evaluated the way ztunnel or Envoy
// matches it (istio/istio pilot/pkg/serviceregistry/ambient/authorization.go, handleRule, and
// istio/ztunnel src/rbac.rs for ztunnel; pilot/pkg/security/authz/model for Envoy), for
//
//   - a caller whose identity the policy does not single out: a workload of the mesh's trust
//     domain in a namespace, and under a service account, that no value of the policy names, as
//     any user's workload is in a Profile namespace registered under a fresh name. A pattern
//     matches such a caller only if it matches every workload ("*", or a principal prefix such
//     as "<trust domain>/ns/*"), so a negative list of names (notNamespaces: [a], notPrincipals)
//     keeps it in, and a positive one keeps it out. The plaintext caller, with no identity, is
//     judged too, only to word the warning;
//   - at every source address of a family: the rules are checked for one address in each stretch
//     of addresses between the bounds of the ranges they name, which decides for all of them, so
//     ipBlocks admit every caller only when they cover a whole family, and notIpBlocks keep out
//     whoever is in them;
//   - sending whatever request it likes, but knowing no secret: to any port, path, method or host
//     the rules name (an operation restricts what is reached, not who), without a JWT (so
//     requestPrincipals and request.auth conditions keep it out, their negations do not), and
//     with a header only if a condition asks for its mere presence (a value could be a secret).
//
// It is conservative: whatever it cannot decide (an unknown condition key, trust domains, remote
// addresses, path templates, a value ztunnel or Envoy would not parse, an empty source or
// operation, whose reading differs between releases) counts as refusing, so the warning never
// names a policy that refuses some such caller.
func evaluateOpenness(rules []*securityv1beta1.Rule, trustDomain string, l4 bool) openness {
	e := evaluator{trustDomain: trustDomain, l4: l4}
	var kept []*securityv1beta1.Rule
	for _, r := range rules {
		// ztunnel drops an ALLOW rule with an L7 attribute: it admits no one there.
		if l4 && len(L7Attributes(&securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{r}})) > 0 {
			continue
		}
		kept = append(kept, r)
	}
	var out openness
	ranges := sourceRanges(kept)
	if len(ranges) > maxRanges {
		out.tooLarge = len(ranges)
		return out
	}
	out.names = namesCallers(kept)
	var mesh, plaintext, named [2]bool
	for f, family := range [][]netip.Addr{stretches(ranges, true), stretches(ranges, false)} {
		named[f] = slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Addr().Is4() == (f == 0) })
		mesh[f] = e.admitsAll(kept, true, family)
		plaintext[f] = e.admitsAll(kept, false, family)
	}
	// A family counts when the rules admit every caller of it and, of the other family, admit
	// every caller too or name no address at all: then they were written for that family alone
	// (ipBlocks: [0.0.0.0/0]), and on a cluster of that family they admit everyone. Rules that
	// keep out some IPv4 addresses and no IPv6 one (notIpBlocks: [10.0.0.0/8]) are not reported
	// for IPv6: on an IPv4 cluster they refuse someone.
	for f := range 2 {
		g := 1 - f
		counts := func(all [2]bool) bool { return all[f] && (all[g] || !named[g]) }
		out.mesh[f], out.plaintext[f] = counts(mesh), counts(plaintext)
	}
	return out
}

// admitsAll says whether some rule admits the mesh (or plaintext) caller at each of the addresses.
func (e evaluator) admitsAll(rules []*securityv1beta1.Rule, mesh bool, addrs []netip.Addr) bool {
	for _, ip := range addrs {
		if !slices.ContainsFunc(rules, func(r *securityv1beta1.Rule) bool { return e.rule(r, caller{mesh: mesh, ip: ip}) }) {
			return false
		}
	}
	return true
}

// caller is one point of the callers the evaluation ranges over: a workload with an identity no
// value of the policy names (mesh), or one without any identity, at a source address.
type caller struct {
	mesh bool
	ip   netip.Addr
}

type evaluator struct {
	trustDomain string
	l4          bool
}

// rule says whether r admits c with some request c can send. A rule matches when its from, its
// to and each of its when conditions match (an empty one matches all).
func (e evaluator) rule(r *securityv1beta1.Rule, c caller) bool {
	if len(r.GetFrom()) > 0 && !slices.ContainsFunc(r.GetFrom(), func(f *securityv1beta1.Rule_From) bool { return e.source(f.GetSource(), c) }) {
		return false
	}
	var dest destination
	headers := map[string][]*securityv1beta1.Condition{}
	for _, w := range r.GetWhen() {
		key, values, notValues := w.GetKey(), w.GetValues(), w.GetNotValues()
		if len(values)+len(notValues) == 0 {
			// ztunnel skips the empty match it becomes, so it matches nothing there.
			return false
		}
		switch {
		case key == "source.ip":
			if !ipCondition(values, notValues, c.ip) {
				return false
			}
		case key == "source.namespace":
			if !identityCondition(values, notValues, func(v string) bool { return e.namespace(v, c) }) {
				return false
			}
		case key == "source.principal":
			if !identityCondition(values, notValues, func(v string) bool { return e.principal(v, c) }) {
				return false
			}
		case key == "destination.port":
			dest.ports = append(dest.ports, clause{values, notValues})
		case key == "destination.ip":
			dest.ips = append(dest.ips, clause{values, notValues})
		case e.l4:
			return false // dropped above; kept here so no L7 key is ever read at ztunnel
		case bracketed(key, "request.headers") != "":
			name := strings.ToLower(bracketed(key, "request.headers"))
			headers[name] = append(headers[name], w)
		case key == "request.auth.principal", key == "request.auth.audiences", key == "request.auth.presenter",
			bracketed(key, "request.auth.claims") != "":
			// The caller has no JWT: only a condition of notValues alone holds.
			if len(values) > 0 {
				return false
			}
		default:
			// remote.ip, connection.sni, experimental.envoy.filters.*, anything unknown.
			return false
		}
	}
	for _, conds := range headers {
		if !headerSatisfiable(conds) {
			return false
		}
	}
	if len(r.GetTo()) == 0 {
		return dest.satisfiable(nil, e.l4)
	}
	return slices.ContainsFunc(r.GetTo(), func(t *securityv1beta1.Rule_To) bool {
		op := t.GetOperation()
		return op != nil && dest.satisfiable(op, e.l4)
	})
}

// source says whether a from entry matches c: every field it sets must.
func (e evaluator) source(s *securityv1beta1.Source, c caller) bool {
	if s == nil || sourceEmpty(s) {
		// ztunnel skips an empty match; Envoy's reading has varied. Count it as matching no one.
		return false
	}
	if len(s.GetTrustDomains())+len(s.GetNotTrustDomains())+len(s.GetRemoteIpBlocks())+len(s.GetNotRemoteIpBlocks()) > 0 {
		return false // not judged: ztunnel drops trust domains in some releases, ignores them in others
	}
	if len(s.GetRequestPrincipals()) > 0 {
		return false // the caller has no JWT
	}
	if len(s.GetServiceAccounts()) > 0 {
		return false // exact names only (Istio allows no wildcard there), never the caller's
	}
	return ipCondition(s.GetIpBlocks(), s.GetNotIpBlocks(), c.ip) &&
		identityCondition(s.GetPrincipals(), s.GetNotPrincipals(), func(v string) bool { return e.principal(v, c) }) &&
		identityCondition(s.GetNamespaces(), s.GetNotNamespaces(), func(v string) bool { return e.namespace(v, c) })
	// notServiceAccounts and notRequestPrincipals name only others: the caller passes them.
}

func sourceEmpty(s *securityv1beta1.Source) bool {
	for _, l := range [][]string{s.GetPrincipals(), s.GetNotPrincipals(), s.GetRequestPrincipals(), s.GetNotRequestPrincipals(),
		s.GetNamespaces(), s.GetNotNamespaces(), s.GetServiceAccounts(), s.GetNotServiceAccounts(), s.GetIpBlocks(),
		s.GetNotIpBlocks(), s.GetRemoteIpBlocks(), s.GetNotRemoteIpBlocks(), s.GetTrustDomains(), s.GetNotTrustDomains()} {
		if len(l) > 0 {
			return false
		}
	}
	return true
}

// principal says whether the principal pattern v matches c. The caller's principal is
// <trust domain>/ns/<namespace>/sa/<service account> with names no value holds, so only "*" and
// a prefix of "<trust domain>/ns/" match it; a plaintext caller has no principal.
func (e evaluator) principal(v string, c caller) bool {
	if !c.mesh {
		return false
	}
	if v == "*" {
		return true
	}
	prefix, isPrefix := strings.CutSuffix(v, "*")
	return isPrefix && !strings.HasPrefix(v, "*") && strings.HasPrefix(e.trustDomain+"/ns/", prefix)
}

// namespace says whether the namespace pattern v matches c: "*" every mesh caller, no other value
// one whose namespace no value names. ztunnel gives a plaintext caller the namespace "", which
// only an exact "" matches; Envoy matches namespaces through the principal, which it has not.
func (e evaluator) namespace(v string, c caller) bool {
	if !c.mesh {
		return e.l4 && v == ""
	}
	return v == "*"
}

// identityCondition is a positive list (any value matches) and a negative one (none does).
func identityCondition(values, notValues []string, match func(string) bool) bool {
	return (len(values) == 0 || slices.ContainsFunc(values, match)) && !slices.ContainsFunc(notValues, match)
}

// ipCondition is ipBlocks and notIpBlocks (or a source.ip condition) for the address ip. A value
// that does not parse makes it false: ztunnel skips it and Envoy drops the rule.
func ipCondition(blocks, notBlocks []string, ip netip.Addr) bool {
	in := func(list []string) (hit, ok bool) {
		for _, s := range list {
			p, err := config.ParseIPBlock(s)
			if err != nil {
				return false, false
			}
			hit = hit || p.Contains(ip)
		}
		return hit, true
	}
	if len(blocks) > 0 {
		if hit, ok := in(blocks); !ok || !hit {
			return false
		}
	}
	if len(notBlocks) > 0 {
		if hit, ok := in(notBlocks); !ok || hit {
			return false
		}
	}
	return true
}

// headerSatisfiable says whether a caller that knows no secret can meet every condition on one
// header: by leaving it out (only notValues hold then) or by sending a value no condition names
// (only the presence pattern "*" matches that).
func headerSatisfiable(conds []*securityv1beta1.Condition) bool {
	absent, fresh := true, true
	for _, c := range conds {
		if len(c.GetValues()) > 0 {
			absent = false
			if !slices.Contains(c.GetValues(), "*") {
				fresh = false
			}
		}
		if slices.Contains(c.GetNotValues(), "*") {
			fresh = false
		}
	}
	return absent || fresh
}

// bracketed returns x of "<prefix>[x]", or "".
func bracketed(key, prefix string) string {
	rest, ok := strings.CutPrefix(key, prefix+"[")
	if !ok {
		return ""
	}
	name, ok := strings.CutSuffix(rest, "]")
	if !ok {
		return ""
	}
	return name
}

// clause is one positive list and one negative list on one attribute.
type clause struct{ values, notValues []string }

// destination collects a rule's when conditions on the destination, which the caller chooses
// along with the operation.
type destination struct{ ports, ips []clause }

// satisfiable says whether some destination the caller may choose meets op (nil: no operation)
// and the rule's destination conditions. An operation with nothing set matches nothing at ztunnel
// (an empty match) and is counted so for Envoy too; at ztunnel only its ports are enforceable
// (a rule with hosts, methods or paths was dropped).
func (d destination) satisfiable(op *securityv1beta1.Operation, l4 bool) bool {
	ports := d.ports
	if op != nil {
		if len(op.GetPorts())+len(op.GetNotPorts()) > 0 {
			ports = append(slices.Clip(ports), clause{op.GetPorts(), op.GetNotPorts()})
		} else if l4 || len(op.GetHosts())+len(op.GetNotHosts())+len(op.GetMethods())+len(op.GetNotMethods())+
			len(op.GetPaths())+len(op.GetNotPaths()) == 0 {
			return false
		}
	}
	if !portsSatisfiable(ports) || !ipsSatisfiable(d.ips) {
		return false
	}
	if op == nil {
		return true
	}
	lower := func(l []string) []string {
		out := make([]string, len(l))
		for i, s := range l {
			out[i] = strings.ToLower(s)
		}
		return out
	}
	paths := clause{op.GetPaths(), op.GetNotPaths()}
	if slices.ContainsFunc(append(slices.Clip(paths.values), paths.notValues...), func(p string) bool { return strings.ContainsAny(p, "{}") }) {
		return false // path templates are not judged
	}
	return stringSatisfiable(clause{lower(op.GetHosts()), lower(op.GetNotHosts())}, "") &&
		stringSatisfiable(clause{op.GetMethods(), op.GetNotMethods()}, "") &&
		stringSatisfiable(paths, "/")
}

// portsSatisfiable says whether one port in 1-65535 meets every clause. A value that is no port
// makes it false (ztunnel skips it, Envoy drops the rule).
func portsSatisfiable(clauses []clause) bool {
	if len(clauses) == 0 {
		return true
	}
	parse := func(l []string) ([]uint64, bool) {
		out := make([]uint64, 0, len(l))
		for _, s := range l {
			p, err := strconv.ParseUint(s, 10, 16)
			if err != nil {
				return nil, false
			}
			out = append(out, p)
		}
		return out, true
	}
	type parsed struct{ in, out []uint64 }
	var cs []parsed
	candidates := map[uint64]bool{}
	for _, c := range clauses {
		in, ok1 := parse(c.values)
		out, ok2 := parse(c.notValues)
		if !ok1 || !ok2 {
			return false
		}
		cs = append(cs, parsed{in, out})
		for _, p := range append(slices.Clip(in), out...) {
			candidates[p] = true
		}
	}
	for p := uint64(1); p <= 65535; p++ {
		if !candidates[p] {
			candidates[p] = true // one port no clause names
			break
		}
	}
	for p := range candidates {
		if p == 0 {
			continue // nothing is served on port 0
		}
		if !slices.ContainsFunc(cs, func(c parsed) bool { return (len(c.in) > 0 && !slices.Contains(c.in, p)) || slices.Contains(c.out, p) }) {
			return true
		}
	}
	return false
}

// ipsSatisfiable says whether one destination address meets every clause.
func ipsSatisfiable(clauses []clause) bool {
	if len(clauses) == 0 {
		return true
	}
	var prefixes []netip.Prefix
	for _, c := range clauses {
		for _, s := range append(slices.Clip(c.values), c.notValues...) {
			p, err := config.ParseIPBlock(s)
			if err != nil {
				return false
			}
			prefixes = append(prefixes, p)
		}
	}
	for _, ip := range append(stretches(prefixes, true), stretches(prefixes, false)...) {
		if !slices.ContainsFunc(clauses, func(c clause) bool { return !ipCondition(c.values, c.notValues, ip) }) {
			return true
		}
	}
	return false
}

// stringSatisfiable says whether some string (starting with start, for paths) matches one of the
// clause's patterns, or any when it has none, and none of its negative ones. Istio reads "*" as
// presence, "*x" as a suffix, "x*" as a prefix, anything else exactly. The candidates are each
// pattern's simplest match, extended with characters no pattern holds, so that no other pattern
// matches them by accident.
func stringSatisfiable(c clause, start string) bool {
	if len(c.values)+len(c.notValues) == 0 {
		return true
	}
	all := append(slices.Clip(c.values), c.notValues...)
	fresh := ""
	for _, r := range "zqxjkvwy0123456789~_" {
		if !slices.ContainsFunc(all, func(p string) bool { return strings.ContainsRune(p, r) }) {
			fresh = strings.Repeat(string(r), 3)
			break
		}
	}
	if fresh == "" {
		return false
	}
	values := c.values
	if len(values) == 0 {
		values = []string{"*"}
	}
	for _, v := range values {
		var cand string
		switch {
		case v == "*":
			cand = start + fresh
		case strings.HasPrefix(v, "*"):
			cand = start + fresh + v[1:]
		case strings.HasSuffix(v, "*"):
			cand = v[:len(v)-1] + fresh
		default:
			cand = v
		}
		if !slices.ContainsFunc(c.notValues, func(n string) bool { return patternMatches(n, cand) }) {
			return true
		}
	}
	return false
}

// patternMatches reads an Istio string pattern: "*" presence, "*x" suffix, "x*" prefix, or exact.
func patternMatches(p, s string) bool {
	switch {
	case p == "*":
		return s != ""
	case strings.HasPrefix(p, "*"):
		return strings.HasSuffix(s, p[1:])
	case strings.HasSuffix(p, "*"):
		return strings.HasPrefix(s, p[:len(p)-1])
	}
	return s == p
}

// sourceRanges lists every source address range the rules name, in ipBlocks, notIpBlocks and
// source.ip conditions. A value that does not parse is left out; the check it is in fails anyway.
func sourceRanges(rules []*securityv1beta1.Rule) []netip.Prefix {
	var out []netip.Prefix
	add := func(l []string) {
		for _, s := range l {
			if p, err := config.ParseIPBlock(s); err == nil {
				out = append(out, p)
			}
		}
	}
	for _, r := range rules {
		for _, f := range r.GetFrom() {
			add(f.GetSource().GetIpBlocks())
			add(f.GetSource().GetNotIpBlocks())
		}
		for _, w := range r.GetWhen() {
			if w.GetKey() == "source.ip" {
				add(w.GetValues())
				add(w.GetNotValues())
			}
		}
	}
	return out
}

// stretches returns the first address of each stretch of one family (IPv4 or IPv6) that the
// prefixes' bounds cut it into: every address of a stretch is in the same prefixes.
func stretches(prefixes []netip.Prefix, ipv4 bool) []netip.Addr {
	first := netip.IPv6Unspecified()
	if ipv4 {
		first = netip.IPv4Unspecified()
	}
	points := []netip.Addr{first}
	for _, p := range prefixes {
		if p.Addr().Is4() != ipv4 {
			continue
		}
		m := p.Masked()
		points = append(points, m.Addr())
		if next := lastAddr(m).Next(); next.IsValid() {
			points = append(points, next)
		}
	}
	slices.SortFunc(points, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(points)
}

// lastAddr is the highest address of the masked prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// namesCallers says whether the rules exclude callers by name (a negative list of identities), so
// the warning says "every caller it does not name".
func namesCallers(rules []*securityv1beta1.Rule) bool {
	for _, r := range rules {
		for _, f := range r.GetFrom() {
			s := f.GetSource()
			if len(s.GetNotPrincipals())+len(s.GetNotNamespaces())+len(s.GetNotServiceAccounts()) > 0 {
				return true
			}
		}
		for _, w := range r.GetWhen() {
			if (w.GetKey() == "source.principal" || w.GetKey() == "source.namespace") && len(w.GetNotValues()) > 0 {
				return true
			}
		}
	}
	return false
}
